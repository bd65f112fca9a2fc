# smax_add_dynamic_dispatch(<target>)
#
# Adds smax's runtime dispatch to <target>: the dispatcher compiled with the
# target's own (baseline) flags, and one object library per ISA compiled with
# that ISA's flags only (never the whole target's), each instantiating every
# kernel for its ISA. After it, <target> can call smax::dynamic::* .
#
#   x86-64:  avx512 (-mavx512f), avx2 (-mavx2 -mfma -mf16c), sse2
#   aarch64: neon
# (the list and the flags: smax_dispatch_isas below), and on x86-64 the
# avx512 level's bf16 variant (-mavx512bf16: bf16 rounding in one
# instruction), which the dispatcher uses in place of the level's own bf16
# table on CPUs with AVX512_BF16.
#
# The dispatcher's objects come first on the link line so that any inline
# function shared by several of these TUs resolves to the baseline copy.
#
# smax_add_dynamic_dispatch(<target> OBJECTS_FROM <other>) links the objects
# already made for <other> (same project; position-independent objects, a
# shared library's, may go into any target, the others only into targets
# that are not position-independent themselves) instead of compiling them
# again: the per-ISA TUs are the slow part of a build (three to four CPU
# minutes each at -O2).

set(SMAX_DISPATCH_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/../src" CACHE INTERNAL "")

# smax_dispatch_isas(<prefix>): the one list of the run-time dispatch's ISAs
# for this target processor, baseline first, as <prefix>_ISAS, and each
# one's compile options as <prefix>_FLAGS_<isa> (the dispatch TUs, the
# tests' per-ISA probes and the bench's per-ISA files all take them here).
# The C++ side of the list is SMAX_ISAS in include/smax/detail/dispatch.hpp.
function(smax_dispatch_isas prefix)
  set(variants "")
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i.86)$")
    set(isas sse2 avx2 avx512)
    set(variants avx512_bf16)
    set(flags_sse2 "-msse2")
    set(flags_avx2 "-mavx2;-mfma;-mf16c")
    set(flags_avx512 "-mavx512f")
    set(flags_avx512_bf16 "-mavx512f;-mavx512dq;-mavx512bf16")
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # g++ 12 warns falsely about _mm512_undefined_ps() inside
      # avx512fintrin.h (used by xsimd); silenced for these TUs only.
      list(APPEND flags_avx512 -Wno-maybe-uninitialized -Wno-uninitialized)
      list(APPEND flags_avx512_bf16 -Wno-maybe-uninitialized -Wno-uninitialized)
    endif()
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
    set(isas neon)
    set(flags_neon "")
  else()
    message(FATAL_ERROR "smax: no dispatch ISA list for ${CMAKE_SYSTEM_PROCESSOR}")
  endif()
  set(${prefix}_ISAS ${isas} PARENT_SCOPE)
  # Variants: TUs that add to a level of the list, not levels of their own.
  set(${prefix}_VARIANTS ${variants} PARENT_SCOPE)
  foreach(isa IN LISTS isas variants)
    set(${prefix}_FLAGS_${isa} "${flags_${isa}}" PARENT_SCOPE)
  endforeach()
endfunction()

function(smax_add_dynamic_dispatch target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "OBJECTS_FROM" "")
  if(NOT TARGET smax::smax)
    message(FATAL_ERROR "smax_add_dynamic_dispatch: smax::smax is not defined (find_package(smax) or add_subdirectory first)")
  endif()
  if(arg_OBJECTS_FROM)
    get_target_property(objs ${arg_OBJECTS_FROM} SMAX_DISPATCH_OBJECT_LIBRARIES)
    if(NOT objs)
      message(FATAL_ERROR "smax_add_dynamic_dispatch: ${arg_OBJECTS_FROM} has no dispatch objects (call smax_add_dynamic_dispatch(${arg_OBJECTS_FROM}) first)")
    endif()
    foreach(obj IN LISTS objs)
      target_sources(${target} PRIVATE $<TARGET_OBJECTS:${obj}>)
    endforeach()
    target_link_libraries(${target} PRIVATE smax::smax)
    set_property(TARGET ${target} APPEND PROPERTY SMAX_DISPATCH_OBJECT_LIBRARIES ${objs})
    return()
  endif()
  smax_dispatch_isas(_smax)

  get_target_property(pic ${target} POSITION_INDEPENDENT_CODE)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "SHARED_LIBRARY" OR type STREQUAL "MODULE_LIBRARY")
    set(pic ON)
  endif()

  set(objs ${target}_smax_dispatcher)
  add_library(${target}_smax_dispatcher OBJECT "${SMAX_DISPATCH_SOURCE_DIR}/smax_dynamic.cpp")
  target_link_libraries(${target}_smax_dispatcher PRIVATE smax::smax)
  foreach(isa IN LISTS _smax_ISAS _smax_VARIANTS)
    set(obj ${target}_smax_${isa})
    add_library(${obj} OBJECT "${SMAX_DISPATCH_SOURCE_DIR}/smax_dynamic_isa.cpp")
    target_link_libraries(${obj} PRIVATE smax::smax)
    target_compile_definitions(${obj} PRIVATE SMAX_DYNAMIC_ISA=${isa})
    target_compile_options(${obj} PRIVATE ${_smax_FLAGS_${isa}})
    list(APPEND objs ${obj})
  endforeach()
  foreach(obj IN LISTS objs)
    if(pic)
      set_target_properties(${obj} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    endif()
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${obj}>)
  endforeach()
  target_link_libraries(${target} PRIVATE smax::smax)
  # The object libraries, for a caller that builds a second library from the
  # same objects (src/CMakeLists.txt: smax_c's static twin).
  set_property(TARGET ${target} APPEND PROPERTY SMAX_DISPATCH_OBJECT_LIBRARIES ${objs})
endfunction()
