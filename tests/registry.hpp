// The dispatch registry's function names (include/smax/detail/dispatch.hpp:
// SMAX_FUNCTIONS, SMAX_TYPED_FUNCTIONS, SMAX_BATCHED_FUNCTIONS), for the
// tests whose per-function tables must cover every function: a function
// registered without its line in such a table fails that table's coverage
// case, naming the function.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <smax/detail/dispatch.hpp>

namespace smax_test {

#define SMAX_TEST_REGISTERED_NAME(name, params, args) #name,
#define SMAX_TEST_REGISTERED_TYPED_NAME(ret, field, name, params, args) #name,

// The single-vector functions of SMAX_FUNCTIONS: the family's kernels,
// each writing one output array.
inline std::set<std::string> registered_kernels() {
  return {SMAX_FUNCTIONS(float, SMAX_TEST_REGISTERED_NAME)};
}

// Every single-vector function: the kernels and the typed functions
// (losses, options, sample; one name for its overloads).
inline std::set<std::string> registered_functions() {
  std::set<std::string> s = registered_kernels();
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

// The function a table entry calls: its name up to the first '/', '(' or
// ' ' ("softmax/online", "entmax_bisect(1.25)", "softmax (options)").
inline std::string function_of(const std::string& entry) {
  return entry.substr(0, entry.find_first_of("/( "));
}

// The registered names that no entry of a table calls, less the ones the
// table leaves out on purpose (`exempt`: the caller says why).
inline std::vector<std::string> uncovered(const std::set<std::string>& registered,
                                          const std::vector<std::string>& entries,
                                          const std::set<std::string>& exempt = {}) {
  std::set<std::string> called;
  for (const auto& e : entries) called.insert(function_of(e));
  std::vector<std::string> missing;
  for (const auto& r : registered)
    if (!called.count(r) && !exempt.count(r)) missing.push_back(r);
  return missing;
}

}  // namespace smax_test
