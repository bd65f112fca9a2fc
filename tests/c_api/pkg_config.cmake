# ctest -P script: install smax from the build tree into WORK_DIR/prefix,
# compile c_api_test.c the way a C user would,
#   cc -std=c99 c_api_test.c $(pkg-config --cflags --libs smax)
# with PKG_CONFIG_PATH pointing into the prefix, and run it against the C++
# reference file: the installed library must give the C++ bits.
cmake_minimum_required(VERSION 3.16)
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "pkg-config not found (apt-get install pkg-config)")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

include("${CMAKE_CURRENT_LIST_DIR}/../packaging/run_command.cmake")

run(${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${prefix}")
file(GLOB_RECURSE pc "${prefix}/*/pkgconfig/smax.pc")
if(NOT pc)
  message(FATAL_ERROR "the install prefix lacks pkgconfig/smax.pc")
endif()
get_filename_component(pcdir "${pc}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pcdir}")
run(${PKG_CONFIG} --cflags --libs smax)
string(STRIP "${last_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
message("pkg-config --cflags --libs smax: ${flags}")
run(${CC} -std=c99 -Wall -Wextra -pedantic -DSMAX_EXPECT_VERSION="${VERSION}" -I${SOURCE}
    ${SOURCE}/c_api_test.c ${flags} -o ${WORK_DIR}/c_api_test)
get_filename_component(libdir "${pcdir}" DIRECTORY)
set(ENV{LD_LIBRARY_PATH} "${libdir}")
run(${WORK_DIR}/c_api_test ${REFERENCE})
message("${last_output}")
