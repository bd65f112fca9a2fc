// The fuzz targets and the bench against the dispatch registry
// (include/smax/detail/dispatch.hpp): a function registered without a fuzz
// case or a benchmark fails here, naming it (CONTRIBUTING.md, steps 7 and
// 8). The sources are read as text from the checkout the tests were built
// from: a call is the function's name followed by "(", not preceded by a
// character of an identifier.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common.hpp"
#include "registry.hpp"

#ifndef SMAX_SOURCE_DIR
#error "tests/CMakeLists.txt defines SMAX_SOURCE_DIR"
#endif

namespace {

// The text of every file in `dir` whose name starts with `prefix` and ends
// with ".cpp" or ".hpp".
std::string sources(const std::string& dir, const std::string& prefix) {
  std::string all;
  for (const auto& e : std::filesystem::directory_iterator(std::string(SMAX_SOURCE_DIR) + "/" + dir)) {
    const std::string name = e.path().filename().string();
    const std::string ext = e.path().extension().string();
    if (name.compare(0, prefix.size(), prefix) != 0 || (ext != ".cpp" && ext != ".hpp")) continue;
    std::ifstream f(e.path());
    std::stringstream s;
    s << f.rdbuf();
    all += s.str();
  }
  return all;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The first arguments of the calls of smax's `name` in `text`: "name(" (or
// "name (") qualified by smax::, dynamic:: or d:: (the fuzz targets' alias
// of smax::dynamic), so that a peer's torch::softmax( does not count.
std::vector<std::string> first_arguments(const std::string& text, const std::string& name) {
  std::vector<std::string> out;
  for (std::size_t p = text.find(name); p != std::string::npos; p = text.find(name, p + 1)) {
    const std::string before = text.substr(p >= 10 ? p - 10 : 0, p >= 10 ? 10 : p);
    const auto ends_with = [&](const std::string& q) {
      return before.size() >= q.size() && before.compare(before.size() - q.size(), q.size(), q) == 0 &&
             (before.size() == q.size() || !ident_char(before[before.size() - q.size() - 1]));
    };
    if (!ends_with("smax::") && !ends_with("dynamic::") && !ends_with("d::")) continue;
    std::size_t q = p + name.size();
    while (q < text.size() && text[q] == ' ') ++q;
    if (q >= text.size() || text[q] != '(') continue;
    const std::size_t end = text.find_first_of(",)", q + 1);
    out.push_back(text.substr(q + 1, end == std::string::npos ? std::string::npos : end - q - 1));
  }
  return out;
}

// Whether `text` calls smax's `name` (see first_arguments).
bool calls(const std::string& text, const std::string& name) { return !first_arguments(text, name).empty(); }

// Whether `text` calls the batched form of `name`: a call whose first
// argument is a matrix view (fuzz_batched names its views A and mx).
bool calls_batched(const std::string& text, const std::string& name) {
  for (const std::string& a : first_arguments(text, name))
    if (a == "A" || a == "mx" || a.compare(0, 17, "smax::matrix_view") == 0) return true;
  return false;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

TEST_CASE("registry: every registered function is called by a fuzz target", "[registry]") {
  const std::string fuzz = sources("fuzz", "fuzz_");
  REQUIRE(!fuzz.empty());
  std::vector<std::string> missing;
  for (const auto& f : smax_test::registered_functions())
    if (!calls(fuzz, f)) missing.push_back(f);
  INFO("registered in dispatch.hpp, called by no fuzz/fuzz_*.cpp: " << joined(missing));
  CHECK(missing.empty());
}

TEST_CASE("registry: every batched function has a case in fuzz_batched's family", "[registry]") {
  const std::string batched = sources("fuzz", "fuzz_batched");
  const std::string topk = sources("fuzz", "fuzz_topk");
  REQUIRE(!batched.empty());
  REQUIRE(!topk.empty());
  // Fuzzed elsewhere: softmax and log_softmax by fuzz_batched's own run<T>
  // (every algorithm), topk_softmax and sample by fuzz_topk (a one-row matrix
  // against the vector call); each must still be called there.
  const std::set<std::string> in_run = {"softmax", "log_softmax"}, in_topk = {"topk_softmax", "sample"};
  std::vector<std::string> missing;
  for (const auto& f : smax_test::registered_batched_functions()) {
    const bool ok = in_run.count(f)    ? calls_batched(batched, f)
                    : in_topk.count(f) ? calls_batched(topk, f)
                                       : batched.find('"' + f + '"') != std::string::npos && calls_batched(batched, f);
    if (!ok) missing.push_back(f);
  }
  INFO("batched forms in dispatch.hpp without their fuzz case: " << joined(missing));
  CHECK(missing.empty());
}

TEST_CASE("registry: every registered function is benchmarked", "[registry]") {
  const std::string bench = sources("bench", "");
  REQUIRE(!bench.empty());
  std::vector<std::string> missing;
  for (const auto& f : smax_test::registered_functions())
    if (!calls(bench, f)) missing.push_back(f);
  INFO("registered in dispatch.hpp, called by no bench/*.cpp: " << joined(missing));
  CHECK(missing.empty());
}

TEST_CASE("registry: the source scan finds calls and only calls", "[registry]") {
  CHECK(calls("d::softmax(x)", "softmax"));
  CHECK(calls("smax::dynamic::softmax (x)", "softmax"));
  CHECK_FALSE(calls("softmax(x)", "softmax"));
  CHECK_FALSE(calls("torch::softmax(x)", "softmax"));
  CHECK_FALSE(calls("d::log_softmax(x)", "softmax"));
  CHECK_FALSE(calls("\"softmax\"", "softmax"));
  CHECK_FALSE(calls("d::softmax_backward(x)", "softmax"));
  CHECK(calls_batched("d::sparsemax(A, Y, ex)", "sparsemax"));
  CHECK(calls_batched("smax::dynamic::sample(smax::matrix_view<const T>(x, 1, n), &o)", "sample"));
  CHECK_FALSE(calls_batched("d::sparsemax(x0, y, n)", "sparsemax"));
}
