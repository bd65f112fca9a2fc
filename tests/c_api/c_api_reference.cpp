// The C++ side of the C API test: the same cases as c_api_test.c (float,
// double, bf16, fp16), in the same order, through smax::dynamic (the C++ API that smax_c wraps; linked from
// the static smax_c, whose objects carry it). Writes every output to
// argv[1]; c_api_test compares its C calls' outputs with it bit for bit.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include <smax/dynamic.hpp>

#include "inputs.h"

namespace {

std::FILE* out = nullptr;

template <class T>
void put(const std::vector<T>& v) {
  std::fwrite(v.data(), sizeof(T), v.size(), out);
}

// The scalar parameters' type: float for the 16-bit types.
template <class T>
using scalar_t = std::conditional_t<sizeof(T) == 2, float, T>;

template <class T>
void run() {
  using smax::matrix_view;
  const std::size_t n = CASE_N, r = CASE_ROWS, c = CASE_COLS, ld = CASE_LD, bn = r * ld;
  std::vector<T> x(n), p(n), d(n), y(n), bx(bn), bp(bn), bd(bn), by(bn);
  CASE_FILL(T, x, p, d, n, 1);
  CASE_FILL(T, bx, bp, bd, bn, 2);
  namespace D = smax::dynamic;
  using S = scalar_t<T>;
  const S a125 = S(1.25), eps = S(1e-6), s = S(0.4), b = S(0.1), tau = S(0.7), a15 = S(1.5);
  for (int a = 0; a <= 4; ++a) D::softmax(x.data(), y.data(), n, static_cast<smax::algorithm>(a)), put(y);
  D::log_softmax(x.data(), y.data(), n), put(y);
  D::sparsemax(x.data(), y.data(), n), put(y);
  D::entmax15(x.data(), y.data(), n), put(y);
  D::entmax_bisect(x.data(), y.data(), n, a125, 40), put(y);
  D::stablemax(x.data(), y.data(), n), put(y);
  D::log_stablemax(x.data(), y.data(), n), put(y);
  D::softpick(x.data(), y.data(), n, eps), put(y);
  D::ssmax(x.data(), y.data(), n, s, b), put(y);
  D::gumbel_noise(y.data(), n, 42, 7), put(y);
  D::gumbel_softmax(x.data(), y.data(), n, tau, 9, false), put(y);
  D::gumbel_softmax(x.data(), y.data(), n, tau, 9, true), put(y);
  D::softmax_backward(p.data(), d.data(), y.data(), n), put(y);
  D::log_softmax_backward(p.data(), d.data(), y.data(), n), put(y);
  D::sparsemax_backward(p.data(), d.data(), y.data(), n), put(y);
  D::entmax_backward(p.data(), d.data(), y.data(), n, a15), put(y);
  D::stablemax_backward(x.data(), d.data(), y.data(), n), put(y);
  D::softpick_backward(x.data(), p.data(), d.data(), y.data(), n, eps), put(y);

  const matrix_view<const T> X(bx.data(), r, c, ld), P(bp.data(), r, c, ld), G(bd.data(), r, c, ld);
  const matrix_view<T> Y(by.data(), r, c, ld);
  auto reset = [&] { std::fill(by.begin(), by.end(), T(0.5)); };
  for (int a = 0; a <= 4; ++a) reset(), D::softmax(X, Y, static_cast<smax::algorithm>(a)), put(by);
  reset(), D::log_softmax(X, Y), put(by);
  reset(), D::sparsemax(X, Y), put(by);
  reset(), D::entmax15(X, Y), put(by);
  reset(), D::entmax_bisect(X, Y, a125, 40), put(by);
  reset(), D::stablemax(X, Y), put(by);
  reset(), D::log_stablemax(X, Y), put(by);
  reset(), D::softpick(X, Y, eps), put(by);
  reset(), D::ssmax(X, Y, s, b), put(by);
  reset(), D::gumbel_softmax(X, Y, tau, 9, false), put(by);
  reset(), D::gumbel_softmax(X, Y, tau, 9, true), put(by);
  reset(), D::softmax_backward(P, G, Y), put(by);
  reset(), D::log_softmax_backward(P, G, Y), put(by);
  reset(), D::sparsemax_backward(P, G, Y), put(by);
  reset(), D::entmax_backward(P, G, Y, a15), put(by);
  reset(), D::stablemax_backward(X, G, Y), put(by);
  reset(), D::softpick_backward(X, P, G, Y, eps), put(by);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !(out = std::fopen(argv[1], "wb"))) {
    std::fprintf(stderr, "usage: %s <output file>\n", argv[0]);
    return 2;
  }
  const char* isas[8];
  const std::size_t count = smax::dynamic::available_isas(isas, 8);
  for (std::size_t k = 0; k < count && k < 8; ++k) {
    if (!smax::dynamic::set_isa(isas[k])) return 1;
    run<float>();
    run<double>();
    run<smax::bf16>();
    run<smax::fp16>();
  }
  return std::fclose(out) == 0 ? 0 : 1;
}
