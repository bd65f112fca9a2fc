# ctest -P script: checks that SMAX_ISA=<ISA> makes smax_example_dynamic run
# <ISA>. Arguments: ISA, KNOWN (the dispatch's ISAs, "|"-separated:
# smax_dispatch_isas), EXAMPLE, TESTS (smax_tests, asked which ISAs this CPU
# has), EMULATOR ("|"-separated command prefix, empty natively).
#   ISA the CPU has        -> the example must print "isa = <ISA>,"
#   ISA compiled in, absent -> prints "SKIPPED: ..." (the test's skip regex)
#   unknown name ("bogus")  -> ignored: the example must print the best ISA
cmake_minimum_required(VERSION 3.16)
string(REPLACE "|" ";" emulator "${EMULATOR}")

execute_process(COMMAND ${emulator} ${TESTS} "[dispatch]"
  OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT listing MATCHES "ISAs compiled in and supported by this CPU:([^\n]*)")
  message(FATAL_ERROR "could not list the ISAs (rc ${rc}):\n${listing}")
endif()
string(STRIP "${CMAKE_MATCH_1}" supported)
string(REPLACE " " ";" supported "${supported}")
list(GET supported 0 best)

string(REPLACE "|" ";" known "${KNOWN}")
if(ISA IN_LIST supported)
  set(expect ${ISA})
elseif(ISA IN_LIST known)
  message("SKIPPED: this CPU lacks ${ISA} (it has: ${supported}); SMAX_ISA=${ISA} was not tested")
  return()
else()
  set(expect ${best})
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -E env SMAX_ISA=${ISA} ${emulator} ${EXAMPLE}
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("SMAX_ISA=${ISA}: ${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the example failed (rc ${rc})")
endif()
if(NOT out MATCHES "isa = ${expect},")
  message(FATAL_ERROR "expected isa = ${expect}")
endif()
