// smax — the public types: the algorithm choice, the batched rows' view, the
// 16-bit storage types, the attention and loss options, MultiMax's
// parameters. Everything else under smax/detail/ is machinery.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "detail/config.hpp"

namespace smax {

// Which softmax algorithm to run. See softmax() in smax.hpp for what each
// costs; `automatic` picks by size.
enum class algorithm {
  automatic,
  three_pass_recompute,
  three_pass_reload,
  two_pass,
  online
};

template <class T>
struct matrix_view {
  T* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t stride = 0;  // elements between row starts; >= cols

  matrix_view() = default;
  // stride 0 means dense rows (stride = cols).
  matrix_view(T* d, std::size_t r, std::size_t c, std::size_t s = 0) : data(d), rows(r), cols(c), stride(s ? s : c) {}
  // matrix_view<float> converts to matrix_view<const float>.
  template <class U, class = std::enable_if_t<std::is_convertible<U*, T*>::value>>
  matrix_view(const matrix_view<U>& o) : data(o.data), rows(o.rows), cols(o.cols), stride(o.stride) {}

  T* row(std::size_t r) const noexcept { return data + r * stride; }
};

namespace detail {

SMAX_INLINE std::uint32_t float_bits(float f) noexcept {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
SMAX_INLINE float bits_float(std::uint32_t u) noexcept {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// float -> bfloat16, round to nearest even; a NaN stays a (quiet) NaN.
constexpr std::uint16_t bf16_from_bits(std::uint32_t u) noexcept {
  return (u & 0x7fffffffu) > 0x7f800000u ? static_cast<std::uint16_t>((u >> 16) | 0x0040u)
                                         : static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// float -> IEEE binary16, round to nearest even (subnormal results too,
// overflow to inf); a NaN stays a quiet NaN with its top payload bits.
// Integer arithmetic only: no floating-point operation, so no subnormal is
// ever formed and the FP environment does not matter.
constexpr std::uint16_t fp16_from_bits(std::uint32_t u) noexcept {
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: inf (or inf itself)
  if (a >= 0x38800000u) {  // >= 2^-14: a normal binary16
    const std::uint32_t v = a - 0x38000000u;  // exponent rebiased by 127 - 15
    return static_cast<std::uint16_t>(sign | ((v + 0xfffu + ((v >> 13) & 1u)) >> 13));
  }
  // Below 2^-14: a multiple of 2^-24 (or 0). The value is mant 2^(e - 150);
  // in units of 2^-24 that is mant >> (126 - e), rounded to even.
  const std::uint32_t e = a >> 23;
  if (e < 102) return static_cast<std::uint16_t>(sign);  // < 2^-25 (a tie at 2^-25 goes to 0 too)
  const std::uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - e;  // 14 .. 24
  const std::uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  return static_cast<std::uint16_t>(sign | (q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u)));
}

// binary16 -> float bits, exact (a subnormal binary16 is a normal float).
constexpr std::uint32_t fp16_to_bits(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return sign | 0x7f800000u | (m << 13);
  if (e != 0) return sign | ((e + 112) << 23) | (m << 13);
  if (m == 0) return sign;
  // m 2^-24 with m < 2^10: normalise m (shift its top bit to bit 10).
  std::uint32_t s = 0;
  while (!(m & (0x400u >> s))) ++s;  // s = 1 .. 10
  return sign | ((113 - s) << 23) | (((m << s) & 0x3ffu) << 13);
}

}  // namespace detail

// bfloat16: the upper 16 bits of an IEEE binary32. Layout-compatible with
// std::uint16_t (PyTorch's at::BFloat16, numpy's ml_dtypes.bfloat16).
struct bf16 {
  std::uint16_t bits;
  bf16() = default;
  explicit bf16(float f) noexcept : bits(detail::bf16_from_bits(detail::float_bits(f))) {}
  explicit operator float() const noexcept { return detail::bits_float(static_cast<std::uint32_t>(bits) << 16); }
  static constexpr bf16 from_bits(std::uint16_t b) noexcept {
    bf16 h{};
    h.bits = b;
    return h;
  }
};

// IEEE binary16 (largest finite 65504). Layout-compatible with std::uint16_t
// (PyTorch's at::Half, numpy's float16, ggml's ggml_fp16_t).
struct fp16 {
  std::uint16_t bits;
  fp16() = default;
  explicit fp16(float f) noexcept : bits(detail::fp16_from_bits(detail::float_bits(f))) {}
  explicit operator float() const noexcept { return detail::bits_float(detail::fp16_to_bits(bits)); }
  static constexpr fp16 from_bits(std::uint16_t b) noexcept {
    fp16 h{};
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(bf16) == 2 && sizeof(fp16) == 2, "16-bit storage types must be 2 bytes");
static_assert(std::is_trivially_copyable<bf16>::value && std::is_trivially_copyable<fp16>::value,
              "16-bit storage types must be trivially copyable");
static_assert(std::is_standard_layout<bf16>::value && std::is_standard_layout<fp16>::value,
              "16-bit storage types must be layout-compatible with std::uint16_t");

namespace detail {
// The options' scalars: T itself, float for the 16-bit types.
template <class T>
struct option_scalar {
  using type = T;
};
template <>
struct option_scalar<bf16> {
  using type = float;
};
template <>
struct option_scalar<fp16> {
  using type = float;
};
}  // namespace detail

// Options of softmax / log_softmax / softmax_backward on one vector (S is
// T, or float for bf16 / fp16).
template <class T>
struct softmax_options {
  using S = typename detail::option_scalar<T>::type;
  S scale = 1;                                          // z = scale * x (finite)
  S softcap = 0;                                        // > 0: z = softcap * tanh(z / softcap)
  const T* mask = nullptr;                              // additive: z += mask_scale * mask[i] (-inf masks)
  S mask_scale = 1;                                     // an ALiBi slope, or 1 (finite)
  std::size_t length = SIZE_MAX;                        // entries i >= length are masked (causal, padding)
  S sink = -std::numeric_limits<S>::infinity();         // an extra logit in the denominator only (not NaN, not +inf)
};

// Per-row valid lengths of the batched form: an array (one per row), or
// causal(offset): row r keeps entries i <= q + offset, q = r's query index
// (r mod rows / heads).
struct causal {
  std::ptrdiff_t offset = 0;
  explicit causal(std::ptrdiff_t o = 0) noexcept : offset(o) {}
};
struct row_lengths {
  const std::size_t* per_row = nullptr;  // null and not causal: every row whole
  bool is_causal = false;
  std::ptrdiff_t offset = 0;
  row_lengths() = default;
  row_lengths(const std::size_t* p) noexcept : per_row(p) {}  // NOLINT: implicit on purpose
  row_lengths(causal c) noexcept : is_causal(true), offset(c.offset) {}  // NOLINT
};

// Options of the batched form: rows x cols scores laid out as `heads`
// consecutive blocks of rows / heads query rows (ggml's and PyTorch's
// [heads][queries][keys]).
template <class T>
struct attention_options {
  using S = typename detail::option_scalar<T>::type;  // T, or float for bf16 / fp16
  S scale = 1;
  S softcap = 0;
  matrix_view<const T> mask;  // row r uses mask row r mod mask.rows; mask.cols >= cols
  row_lengths lengths;
  std::size_t heads = 1;
  const S* slopes = nullptr;  // mask_scale per head
  S max_bias = 0;             // > 0 and no slopes: ALiBi slopes derived as ggml does
  const S* sinks = nullptr;   // sink logit per head
};

// How the batched losses combine their rows (PyTorch's `reduction`).
enum class reduction { none, sum, mean };

// Options of the batched cross-entropy. A row whose target equals
// ignore_index has loss 0 and gradient 0 and is left out of `mean`.
struct loss_options {
  reduction reduce = reduction::mean;
  float label_smoothing = 0;
  std::int64_t ignore_index = -100;
};

// The modulator's parameters as the official code's nn.Parameters `ranges`
// and `ts` (ZhouYuxuanYX/MultiMax, SeLU), 4 each, in its order:
//   sigma(x) = x + ts[0] relu(ranges[0] - x) + ts[1] relu(x - ranges[1])
//                + ts[2] relu(ranges[2] - x)^2 + ts[3] relu(x - ranges[3])^2
// All zero (the default): sigma is the identity and multimax is softmax.
struct multimax_params {
  double ranges[4] = {0, 0, 0, 0};
  double ts[4] = {0, 0, 0, 0};
};

// The parameters of smax::sample. temperature 0: argmax; top_k 0: keep
// all; top_p 1 and min_p 0: no cut.
struct sampling {
  float temperature = 1;
  std::size_t top_k = 0;
  float top_p = 1;
  float min_p = 0;
};

}  // namespace smax
