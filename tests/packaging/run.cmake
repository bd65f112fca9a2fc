# ctest -P script: builds and runs one consumer project of smax.
#   MODE=find_package     install smax from the test build (SMAX_BINARY_DIR)
#                         into WORK_DIR/prefix with `cmake --install`, then
#                         find_package(smax 0.1) from that prefix; also
#                         checks that an incompatible version (1.0) is refused
#   MODE=add_subdirectory add_subdirectory(SMAX_SOURCE_DIR)
# GENERATOR and CXX: the generator and compiler of the enclosing build.
cmake_minimum_required(VERSION 3.16)
set(consumer_src "${CMAKE_CURRENT_LIST_DIR}/${MODE}")
file(REMOVE_RECURSE "${WORK_DIR}")

include("${CMAKE_CURRENT_LIST_DIR}/run_command.cmake")

# Debug at -O0 without debug information: these builds check the package,
# not the kernels' speed or a debugger's view, and so compile the per-ISA
# dispatch TUs several times faster.
set(configure_args -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0")
if(MODE STREQUAL "find_package")
  set(prefix "${WORK_DIR}/prefix")
  run(${CMAKE_COMMAND} --install "${SMAX_BINARY_DIR}" --prefix "${prefix}")
  foreach(f smax/smax.hpp smax/dynamic.hpp smaxConfig.cmake smaxConfigVersion.cmake smaxTargets.cmake
            smaxDispatch.cmake smax_dynamic_isa.cpp)
    file(GLOB_RECURSE found "${prefix}/*/${f}")
    if(NOT found)
      message(FATAL_ERROR "the install prefix lacks ${f}")
    endif()
  endforeach()
  list(APPEND configure_args -DCMAKE_PREFIX_PATH=${prefix})
  # The version file: a 1.0 request must not accept 0.1.
  execute_process(COMMAND ${CMAKE_COMMAND} -S "${consumer_src}" -B "${WORK_DIR}/wrong-version" ${configure_args}
                          -DSMAX_REQUESTED_VERSION=1.0
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "smax")
    message(FATAL_ERROR "find_package(smax 1.0) accepted the installed 0.x package:\n${err}")
  endif()
elseif(MODE STREQUAL "add_subdirectory")
  list(APPEND configure_args -DSMAX_SOURCE_DIR=${SMAX_SOURCE_DIR})
else()
  message(FATAL_ERROR "MODE must be find_package or add_subdirectory")
endif()

run(${CMAKE_COMMAND} -S "${consumer_src}" -B "${WORK_DIR}/build" ${configure_args})
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build" --parallel 2)
run("${WORK_DIR}/build/consumer")
message("${last_output}")
