// The dispatch registry's function names (include/smax/detail/dispatch.hpp:
// SMAX_FUNCTIONS, SMAX_TYPED_FUNCTIONS, SMAX_BATCHED_FUNCTIONS), for
// tests/test_registry.cpp's checks that the fuzz targets and the bench call
// every registered function; and the multimax parameters the tables share.
#pragma once

#include <set>
#include <string>

#include <smax/detail/dispatch.hpp>

namespace smax_test {

#define SMAX_TEST_REGISTERED_NAME(name, params, args) #name,
#define SMAX_TEST_REGISTERED_TYPED_NAME(ret, field, name, params, args) #name,

// Every single-vector function: the kernels and the typed functions
// (losses, options, sample; one name for its overloads).
inline std::set<std::string> registered_functions() {
  std::set<std::string> s = {SMAX_FUNCTIONS(float, SMAX_TEST_REGISTERED_NAME)};
  for (const char* n : {SMAX_TYPED_FUNCTIONS(float, SMAX_TEST_REGISTERED_TYPED_NAME)}) s.insert(n);
  return s;
}

// Every function with a batched (matrix_view) form.
inline std::set<std::string> registered_batched_functions() {
  return {SMAX_BATCHED_FUNCTIONS(float, SMAX_TEST_REGISTERED_NAME)};
}

// MultiMax with every part of its modulator active (test_seeds' first set),
// for the tables' multimax entries.
inline smax::multimax_params some_multimax_params() {
  smax::multimax_params p;
  const double r[4] = {-0.5, 0.8, -1.5, 2.0}, t[4] = {0.3, -0.2, 0.05, 0.02};
  for (int i = 0; i < 4; ++i) {
    p.ranges[i] = r[i];
    p.ts[i] = t[i];
  }
  return p;
}

#undef SMAX_TEST_REGISTERED_NAME
#undef SMAX_TEST_REGISTERED_TYPED_NAME

}  // namespace smax_test
