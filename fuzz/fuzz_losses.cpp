// libFuzzer target: logsumexp, cross_entropy, cross_entropy_backward (with
// and without the saved logsumexp, in place or not), the attention options
// of softmax / log_softmax / softmax_backward, and their batched attention
// rows, float and double, every ISA the CPU has,
// guard regions; checked against long-double references, the special-value
// rules, and "no subnormal output".
#include <smax/parallel.hpp>

#include "common.hpp"

namespace {

using ld = long double;

template <class T>
bool subnormal(T v) {
  return std::fpclassify(v) == FP_SUBNORMAL;
}

template <class T>
void run_losses(smax_fuzz::stream& in, const std::vector<T>& x) {
  const std::size_t n = x.size();
  const double lse = smax::dynamic::logsumexp(x.data(), n);
  bool nan = false, pinf = false;
  ld m = -INFINITY;
  for (T v : x) {
    nan |= v != v;
    pinf |= v == std::numeric_limits<T>::infinity();
    if (v == v) m = std::max<ld>(m, v);
  }
  if (nan) {
    if (lse == lse) smax_fuzz::fail("logsumexp: NaN in x must give NaN");
  } else if (pinf) {
    if (lse != INFINITY) smax_fuzz::fail("logsumexp: +inf in x must give +inf");
  } else if (m == -INFINITY) {
    if (lse != -INFINITY) smax_fuzz::fail("logsumexp: all -inf must give -inf");
  } else {
    ld s = 0;
    for (T v : x) s += std::exp(ld(v) - m);
    const ld ref = m + std::log(s);
    const double tol = (sizeof(T) == 4 ? 1e-6 : 1e-14) * std::max<double>(1.0, std::fabs(double(ref)));
    if (!(std::fabs(lse - double(ref)) <= tol)) smax_fuzz::fail("logsumexp: off the reference");
  }
  if (n == 0) return;
  const std::size_t t = in.u32() % n;
  const float ls = (in.byte() % 4 == 0) ? float(in.byte()) / 255.0f : 0.0f;
  const double dloss = std::ldexp(double(int(in.byte()) - 128) / 64.0, int(in.byte() % 64) - 32);
  const bool in_place = in.byte() & 1;
  const bool saved = in.byte() & 1;
  smax_fuzz::context() += "target " + std::to_string(t) + ", label smoothing " + std::to_string(ls) + ", dloss " +
                          std::to_string(dloss) + (saved ? ", saved lse" : "") + (in_place ? ", in place\n" : "\n");
  {
    // The loss: lse - ((1 - ls) x_t + ls mean(x)); where every x is finite,
    // against long double, allowing beside the relative error the double
    // terms' own rounding (|term| 2^-52) and the mean's sum in T lanes (a
    // few T ulps of mean |x|).
    const double loss = smax::dynamic::cross_entropy(x.data(), n, t, ls);
    bool finite = true;
    ld mean = 0, mean_abs = 0;
    for (T v : x) {
      finite &= v == v && v != std::numeric_limits<T>::infinity() && v != -std::numeric_limits<T>::infinity();
      mean += v;
      mean_abs += std::fabs(ld(v));
    }
    mean /= ld(n);
    mean_abs /= ld(n);
    if (nan) {
      if (loss == loss) smax_fuzz::fail("cross_entropy: NaN in x must give NaN");
    } else if (finite) {
      ld s = 0;
      for (T v : x) s += std::exp(ld(v) - m);
      const ld lse_ref = m + std::log(s);
      const ld ref = lse_ref - ((1 - ld(ls)) * ld(x[t]) + ld(ls) * mean);
      const ld tol = (sizeof(T) == 4 ? 1e-6L : 1e-13L) * std::max<ld>(1, std::fabs(ref)) +
                     (std::fabs(lse_ref) + std::fabs(ld(x[t])) + std::fabs(mean)) * 0x1p-50L +
                     ld(ls) * mean_abs * 16 * ld(std::numeric_limits<T>::epsilon());
      // (a loss beyond double's range is +inf: logits of both signs near
      // double's largest)
      const bool overflows = ref > ld(std::numeric_limits<double>::max());
      if (!(std::fabs(ld(loss) - ref) <= tol) && !(overflows && loss == INFINITY))
        smax_fuzz::fail("cross_entropy: off the reference");
    }
  }
  smax_fuzz::guarded<T> xb(n, in.byte()), db(n, in.byte());
  xb.assign(x);
  T* out = in_place ? xb.data() : db.data();
  if (saved)
    smax::dynamic::cross_entropy_backward(xb.data(), n, t, dloss, out, ls, lse);
  else
    smax::dynamic::cross_entropy_backward(xb.data(), n, t, dloss, out, ls);
  xb.check_guards("cross_entropy_backward");
  db.check_guards("cross_entropy_backward");
  const std::vector<T> dx = in_place ? xb.vec() : db.vec();
  for (T v : dx)
    if (subnormal(v)) smax_fuzz::fail("cross_entropy_backward: subnormal output");
  if (!nan && !pinf && m > -INFINITY && dloss != 0) {
    // Against the reference where x is finite: the gradient sums to 0 and
    // each entry is dloss (p - q).
    ld s = 0;
    for (T v : x) s += std::exp(ld(v) - m);
    for (std::size_t i = 0; i < n; ++i) {
      const ld p = std::exp(ld(x[i]) - m) / s;
      const ld q = ld(ls) / ld(n) + (i == t ? 1 - ld(ls) : 0);
      const ld ref = ld(dloss) * (p - q);
      const ld scale = std::fabs(ld(dloss)) * (p + q);
      // The kernel exponentiates against a double logsumexp: its rounding,
      // |lse| 2^-53, adds to the relative error (double's huge logits).
      const ld rel = (sizeof(T) == 4 ? 2e-6L : 1e-13L) + std::fabs(ld(lse)) * 0x1p-52L;
      const ld tol = rel * scale + 2 * ld(std::numeric_limits<T>::min()) +
                     ld(std::numeric_limits<T>::min()) * std::ldexp(1.0L, std::numeric_limits<T>::digits + 2);
      if (!(std::fabs(ld(dx[i]) - ref) <= tol)) smax_fuzz::fail("cross_entropy_backward: off the reference");
    }
  }
}

// softmax_backward with the options, from the kernel's own y: guards, 0
// where y is 0, and where dy is ordinary (|dy| <= 2^21) the formula
// dx = y (dy - y.dy) scale (1 - tanh^2(scale x / softcap)) in long double.
template <class T>
void check_attention_backward(smax_fuzz::stream& in, const std::vector<T>& x, const std::vector<T>& y,
                              const smax::softmax_options<T>& o) {
  const std::size_t n = x.size();
  const std::vector<T> dy = in.values<T>(n);
  smax_fuzz::describe("dy", dy);
  smax_fuzz::guarded<T> dxb(n, in.byte());
  smax::dynamic::softmax_backward(x.data(), y.data(), dy.data(), dxb.data(), n, o);
  dxb.check_guards("softmax_backward(options)");
  const std::vector<T> dx = dxb.vec();
  bool ordinary = true;
  ld dot = 0, mag = 0, tiny = 0;
  const ld min = std::numeric_limits<T>::min();
  // Products the dot may drop, as fuzz_backward counts them: below
  // 2^digits min (mul_summable, where the sum runs in T lanes: double,
  // NEON's float; backward.hpp dot_normal), each with one subnormal step;
  // and a dot below 2 min is taken as 0 (normal_or_zero). (The check had
  // 4 min: found with SMAX_FUZZ_SEED=2, double, y_5 = 1, y_5 dy_5 = 2^-1005
  // dropped, dx_5 = dy_5.)
  const ld tiny_term = std::ldexp(min, std::numeric_limits<T>::digits);
  for (std::size_t i = 0; i < n; ++i) {
    if (y[i] == T(0) && dx[i] != T(0)) smax_fuzz::fail("softmax_backward(options): y = 0 must give dx = 0");
    ordinary &= std::fabs(ld(dy[i])) <= 0x1p21L && y[i] == y[i];
    const ld p = ld(y[i]) * dy[i];
    dot += p;
    mag += std::fabs(p);
    if (p != 0 && std::fabs(p) < tiny_term) tiny += std::fabs(p) + std::numeric_limits<T>::denorm_min();
  }
  if (std::fabs(dot) < 2 * min) tiny += min;
  if (!ordinary || !(std::fabs(ld(o.scale)) <= 0x1p40L)) return;
  const ld flat = sizeof(T) == 4 ? 2e-6L : 1e-14L;
  const ld sc = std::fabs(ld(o.scale));
  for (std::size_t i = 0; i < n; ++i) {
    if (y[i] == T(0)) continue;  // checked above (x there may be anything)
    ld d = ld(y[i]) * (ld(dy[i]) - dot) * ld(o.scale);
    if (o.softcap > 0) {
      const ld t = std::tanh(ld(o.scale) * x[i] / ld(o.softcap));
      d *= 1 - t * t;
    }
    // (+ 4 min, + |y| tiny, times the scale: results and dot products below
    // a few times the smallest normal are 0, never subnormal, as fuzz_backward)
    const ld bound = 8 * flat * std::fabs(ld(y[i])) * (std::fabs(ld(dy[i])) + mag) * sc +
                     (4 * min + std::fabs(ld(y[i])) * tiny) * std::max<ld>(1, sc);
    if (!(std::fabs(ld(dx[i]) - d) <= bound)) smax_fuzz::fail("softmax_backward(options): off the reference");
  }
}

template <class T>
void run_attention(smax_fuzz::stream& in, const std::vector<T>& x) {
  const std::size_t n = x.size();
  smax::softmax_options<T> o;
  const std::uint8_t f = in.byte();
  std::vector<T> mask;
  if (f & 1) o.scale = static_cast<T>(std::ldexp(double(int(in.byte()) - 100) / 32.0, int(in.byte() % 8) - 4));
  if (f & 2) o.softcap = static_cast<T>(1 + in.byte() % 50);
  if (f & 4) {
    mask = in.values<T>(n);
    for (auto& v : mask)
      if (v != v || v == std::numeric_limits<T>::infinity()) v = T(0);  // a mask is finite or -inf
    o.mask = mask.data();
    o.mask_scale = static_cast<T>(double(in.byte()) / 64.0);
  }
  if (f & 8) o.length = in.byte() % (n + 2);
  if (f & 16) o.sink = static_cast<T>(double(int(in.byte()) - 128) / 8.0);
  const bool log = f & 32;
  const bool in_place = f & 64;
  smax_fuzz::context() += "scale " + std::to_string(double(o.scale)) + ", softcap " + std::to_string(double(o.softcap)) +
                          ", mask_scale " + std::to_string(double(o.mask_scale)) + ", length " +
                          std::to_string(o.length) + ", sink " + std::to_string(double(o.sink)) +
                          (log ? ", log" : "") + (in_place ? ", in place\n" : "\n");
  if (o.mask) smax_fuzz::describe("mask", mask);
  smax_fuzz::guarded<T> xb(n, in.byte()), yb(n, in.byte());
  xb.assign(x);
  T* out = in_place ? xb.data() : yb.data();
  if (log)
    smax::dynamic::log_softmax(xb.data(), out, n, o);
  else
    smax::dynamic::softmax(xb.data(), out, n, o);
  xb.check_guards("softmax(options)");
  yb.check_guards("softmax(options)");
  const std::vector<T> y = in_place ? xb.vec() : yb.vec();
  // Reference z; masked -inf.
  std::vector<ld> z(n);
  bool nan = false, pinf = false;
  ld M = o.sink;
  for (std::size_t i = 0; i < n; ++i) {
    ld v = ld(o.scale) * x[i];
    if (o.softcap > 0) v = ld(o.softcap) * std::tanh(v / ld(o.softcap));
    if (o.mask) v = mask[i] == -std::numeric_limits<T>::infinity() ? -INFINITY : v + ld(o.mask_scale) * mask[i];
    if (i >= o.length) v = -INFINITY;
    z[i] = v;
    nan |= v != v;
    pinf |= v == INFINITY;
    if (v == v) M = std::max(M, v);
  }
  // The kernel computes z in T: where the exact z (or scale x on its way)
  // is beyond T's range it overflows to +-inf (or NaN for inf - inf), which
  // the long-double reference does not model; only the output's form is
  // checked then.
  bool overflow = false;
  for (std::size_t i = 0; i < n && i < o.length; ++i)
    overflow |= (z[i] == z[i] && z[i] != -INFINITY && std::fabs(z[i]) > ld(std::numeric_limits<T>::max()) / 2) ||
                std::fabs(ld(o.scale) * x[i]) > ld(std::numeric_limits<T>::max()) / 2;
  const T masked = log ? -std::numeric_limits<T>::infinity() : T(0);
  if (overflow) {
    for (T v : y)
      if (!log && subnormal(v)) smax_fuzz::fail("softmax(options): subnormal output");
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (nan) {
      if (y[i] == y[i]) smax_fuzz::fail("softmax(options): NaN must give NaN");
      continue;
    }
    if (!log && subnormal(y[i])) smax_fuzz::fail("softmax(options): subnormal output");
    if (z[i] == -INFINITY && y[i] != masked) smax_fuzz::fail("softmax(options): a masked entry must be 0 / -inf");
  }
  if (!log && !in_place && !nan) check_attention_backward(in, x, y, o);
  if (nan || pinf || M == -INFINITY) return;
  // Finite scores: the values. z is rounded in T by the kernel (scale x,
  // tanh, the mask's fma): allow |z| 2^-22 (float) beside the flat error.
  const ld eps = sizeof(T) == 4 ? 0x1p-22L : 0x1p-50L;
  ld s = std::exp(ld(o.sink) - M);
  for (ld v : z) s += std::exp(v - M);
  for (std::size_t i = 0; i < n; ++i) {
    if (z[i] == -INFINITY) continue;
    const ld r = log ? z[i] - M - std::log(s) : std::exp(z[i] - M) / s;
    const ld bound = (sizeof(T) == 4 ? 2e-6L : 1e-14L) + eps * (std::fabs(z[i]) + std::fabs(M) + (log ? std::fabs(r) : 0));
    if (log) {
      if (!(std::fabs(ld(y[i]) - r) <= bound * std::max<ld>(1, std::fabs(r)))) smax_fuzz::fail("log_softmax(options): off the reference");
    } else if (r > 1e-30L) {
      if (!(std::fabs(ld(y[i]) - r) <= bound * r)) smax_fuzz::fail("softmax(options): off the reference");
    }
  }
}

using smax_fuzz::pick_executor;
using smax_fuzz::same_or_both_nan;

// The batched attention forms (softmax, log_softmax, softmax_backward over
// rows of x): heads, a mask broadcast over them, causal or per-row lengths,
// ALiBi slopes (given or from max_bias), sinks, on a strided matrix. Each
// row must be bitwise the single-vector call with row_options, on any
// executor, and the stride's gaps untouched.
template <class T>
void run_attention_rows(smax_fuzz::stream& in, const std::vector<T>& x_all) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  const std::size_t rows = 1 + in.byte() % 8;
  std::size_t heads = 1 + in.byte() % rows;
  while (rows % heads) --heads;
  const std::size_t cols = x_all.size() / rows, stride = cols + in.byte() % 3, per_head = rows / heads;
  const std::uint8_t f = in.byte();
  smax::attention_options<T> o;
  o.heads = heads;
  if (f & 1) o.scale = static_cast<T>(double(int(in.byte()) - 100) / 32.0);
  if (f & 2) o.softcap = static_cast<T>(1 + in.byte() % 50);
  std::vector<T> mask;
  if (f & 4) {
    const std::size_t mask_rows = 1 + in.byte() % rows;
    mask = in.values<T>(mask_rows * cols);
    for (auto& v : mask)
      if (v != v || v == inf) v = T(0);
    o.mask = smax::matrix_view<const T>(mask.data(), mask_rows, cols);
  }
  std::vector<std::size_t> lengths(rows);
  if (f & 8) {
    o.lengths = smax::causal(std::ptrdiff_t(in.byte()) - 128);
  } else if (f & 16) {
    for (auto& l : lengths) l = in.byte() % (cols + 2);
    o.lengths = lengths.data();
  }
  std::vector<T> slopes(heads), sinks(heads);
  if (f & 32) {
    for (auto& v : slopes) v = static_cast<T>(double(in.byte()) / 64.0);
    o.slopes = slopes.data();
  } else {
    o.max_bias = static_cast<T>(in.byte() % 9);
  }
  if (f & 64) {
    for (auto& v : sinks) v = in.byte() < 32 ? -inf : static_cast<T>(double(int(in.byte()) - 128) / 8.0);
    o.sinks = sinks.data();
  }
  const bool log = f & 128;
  smax::executor* ex = pick_executor(in.byte());
  smax_fuzz::context() += "rows " + std::to_string(rows) + ", heads " + std::to_string(heads) + ", stride " +
                          std::to_string(stride) + ", flags " + std::to_string(f) + "\n";
  const T canary = T(-3.5);
  std::vector<T> x(rows * stride, canary), y(rows * stride, canary), dx(rows * stride, canary);
  for (std::size_t r = 0; r < rows; ++r)
    std::copy(x_all.begin() + std::ptrdiff_t(r * cols), x_all.begin() + std::ptrdiff_t((r + 1) * cols),
              x.begin() + std::ptrdiff_t(r * stride));
  const std::vector<T> dy = in.values<T>(rows * stride);
  const smax::matrix_view<const T> xv(x.data(), rows, cols, stride), dyv(dy.data(), rows, cols, stride);
  const smax::matrix_view<T> yv(y.data(), rows, cols, stride), dxv(dx.data(), rows, cols, stride);
  if (log)
    smax::dynamic::log_softmax(xv, yv, o, ex);
  else
    smax::dynamic::softmax(xv, yv, o, ex);
  smax::dynamic::softmax_backward(xv, yv, dyv, dxv, o, ex);
  std::vector<T> one(cols), done(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const smax::softmax_options<T> so = smax::detail::row_options(o, rows, r);
    if (so.mask && so.mask != mask.data() + (r % o.mask.rows) * cols) smax_fuzz::fail("attention rows: mask row");
    if (o.lengths.is_causal) {
      const std::ptrdiff_t keep = std::ptrdiff_t(r % per_head) + o.lengths.offset + 1;
      if (so.length != (keep < 0 ? 0 : std::size_t(keep))) smax_fuzz::fail("attention rows: causal length");
    }
    const T* xr = x.data() + r * stride;
    if (log)
      smax::dynamic::log_softmax(xr, one.data(), cols, so);
    else
      smax::dynamic::softmax(xr, one.data(), cols, so);
    smax::dynamic::softmax_backward(xr, y.data() + r * stride, dy.data() + r * stride, done.data(), cols, so);
    for (std::size_t c = 0; c < cols; ++c) {
      if (!same_or_both_nan(one[c], y[r * stride + c])) smax_fuzz::fail("attention rows: not the row's call");
      if (!same_or_both_nan(done[c], dx[r * stride + c]))
        smax_fuzz::fail("attention rows (backward): not the row's call");
    }
    for (std::size_t c = cols; c < stride; ++c)
      if (!(y[r * stride + c] == canary && dx[r * stride + c] == canary))
        smax_fuzz::fail("attention rows: a write in the stride's gap");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  smax_fuzz::stream in(data, size);
  in.pick_isa();
  const std::uint8_t mode = in.byte();
  const std::size_t n = in.size(4096);
  if (mode & 1) {
    const std::vector<double> x = in.values<double>(n);
    smax_fuzz::context() = "double, mode " + std::to_string(mode) + "\n";
    smax_fuzz::describe("x", x);
    if ((mode & 14) == 14) run_attention_rows(in, x); else if (mode & 2) run_attention(in, x); else run_losses(in, x);
  } else {
    const std::vector<float> x = in.values<float>(n);
    smax_fuzz::context() = "float, mode " + std::to_string(mode) + "\n";
    smax_fuzz::describe("x", x);
    if ((mode & 14) == 14) run_attention_rows(in, x); else if (mode & 2) run_attention(in, x); else run_losses(in, x);
  }
  return 0;
}
