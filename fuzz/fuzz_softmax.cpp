// libFuzzer target: softmax (every algorithm) and log_softmax, float and
// double, every ISA the CPU has, out of place and in place, misaligned, with
// guard regions; checked against the long-double reference and the
// special-value rules.
#include "common.hpp"

namespace {

template <class T>
void run(smax_fuzz::stream& in) {
  const auto a = static_cast<smax::algorithm>(in.byte() % 5);
  const bool in_place = in.byte() & 1;
  const std::size_t offset = in.byte();
  const std::size_t n = in.size(4096);
  const std::vector<T> x = in.values<T>(n);
  smax_fuzz::context() = std::string(sizeof(T) == 4 ? "float, " : "double, ") + "algorithm " +
                         std::to_string(static_cast<int>(a)) + (in_place ? ", in place\n" : "\n");
  smax_fuzz::describe("x", x);

  smax_fuzz::guarded<T> xb(n, offset), yb(n, offset + 1);
  xb.assign(x);
  T* out = in_place ? xb.data() : yb.data();
  smax::dynamic::softmax(xb.data(), out, n, a);
  std::vector<T> y = in_place ? xb.vec() : yb.vec();
  xb.check_guards("softmax");
  yb.check_guards("softmax");
  if (!in_place && xb.vec() != x && !smax_fuzz::any_nan(x)) smax_fuzz::fail("softmax: input modified");
  if (!smax_fuzz::check_special_softmax(x, y, false, "softmax")) smax_fuzz::check_softmax_values(x, y, "softmax");

  xb.assign(x);
  out = in_place ? xb.data() : yb.data();
  smax::dynamic::log_softmax(xb.data(), out, n);
  y = in_place ? xb.vec() : yb.vec();
  xb.check_guards("log_softmax");
  yb.check_guards("log_softmax");
  if (!smax_fuzz::check_special_softmax(x, y, true, "log_softmax"))
    smax_fuzz::check_log_softmax_values(x, y, "log_softmax");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  smax_fuzz::stream in(data, size);
  in.pick_isa();
  if (in.byte() & 1)
    run<double>(in);
  else
    run<float>(in);
  return 0;
}
