// smax._smax: the compiled half of the Python module, over the C API
// (include/smax/smax.h, the static smax_c). It takes 2-D numpy arrays whose
// rows are contiguous (smax/__init__.py reshapes, moves the axis and copies
// where it must), checks them again, and calls the batched C function with
// the GIL released. Errors: a status of SMAX_EINVAL raises ValueError with
// the C++ message (which names the parameter), SMAX_ENOMEM MemoryError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <smax/smax.h>

namespace py = pybind11;

namespace {

// The element types the bindings take: float and double, and the 16-bit
// ones as tags over their uint16_t storage (numpy float16 is fp16; a uint16
// array is bf16 -- only smax/__init__.py passes one, for a torch bfloat16
// tensor). storage: the C API's array type; scalar: its scalar parameters'.
struct bf16_tag {};
struct f16_tag {};
template <class T>
struct element {
  using storage = T;
  using scalar = T;
  static py::dtype dtype() { return py::dtype::of<T>(); }
};
template <>
struct element<bf16_tag> {
  using storage = std::uint16_t;
  using scalar = float;
  static py::dtype dtype() { return py::dtype::of<std::uint16_t>(); }
};
template <>
struct element<f16_tag> {
  using storage = std::uint16_t;
  using scalar = float;
  static py::dtype dtype() { return py::dtype("float16"); }
};
template <class T>
using storage_t = typename element<T>::storage;
template <class T>
using scalar_t = typename element<T>::scalar;

// A 2-D array's rows as the C API wants them: pointer, shape, row stride in
// elements. `name` is the Python argument's name, for the error text.
template <class E>
struct rows_of {
  E* data;
  std::size_t rows, cols, ld;
};

template <class T>
rows_of<storage_t<T>> rows_view(py::array& a, const char* name, bool writable) {
  using E = storage_t<T>;
  if (a.ndim() != 2) throw py::value_error(std::string(name) + " must be 2-D here");
  if (!a.dtype().is(element<T>::dtype())) throw py::type_error(std::string(name) + " has the wrong dtype");
  const auto rows = static_cast<std::size_t>(a.shape(0)), cols = static_cast<std::size_t>(a.shape(1));
  const auto s0 = a.strides(0), s1 = a.strides(1);
  if (cols > 1 && s1 != static_cast<py::ssize_t>(sizeof(E)))
    throw py::value_error(std::string(name) + "'s rows must be contiguous");
  std::size_t ld = cols;
  if (rows > 1) {
    if (s0 < 0 || s0 % static_cast<py::ssize_t>(sizeof(E)) != 0)
      throw py::value_error(std::string(name) + " has a negative or misaligned row stride");
    ld = static_cast<std::size_t>(s0) / sizeof(E);
  }
  E* p = writable ? static_cast<E*>(a.mutable_data()) : static_cast<E*>(const_cast<void*>(a.data()));
  return {p, rows, cols, ld};
}

template <class T, class F, class D, class B, class H>
constexpr auto pick(F f, D d, B b, H h) {
  if constexpr (std::is_same<T, float>::value)
    return f;
  else if constexpr (std::is_same<T, double>::value)
    return d;
  else if constexpr (std::is_same<T, bf16_tag>::value)
    return b;
  else
    return h;
}
#define SMAX_PY_FN(T, name) pick<T>(&smax_##name##_f32, &smax_##name##_f64, &smax_##name##_bf16, &smax_##name##_f16)

void raise(smax_status s) {
  switch (s) {
    case SMAX_OK: return;
    case SMAX_EINVAL: throw py::value_error(smax_last_error());
    case SMAX_ENOMEM: throw std::bad_alloc();
    default: throw std::runtime_error(smax_last_error());
  }
}

// Runs the C call with the GIL released, then raises on an error status.
template <class F, class... A>
void call(F f, A... a) {
  smax_status s;
  {
    py::gil_scoped_release unlocked;
    s = f(a...);
  }
  raise(s);
}

// Calls body(tag) for x's dtype: float32, float64, float16 (fp16) or
// uint16 (bf16 storage).
template <class B>
void by_dtype(const py::array& x, const char* name, B&& body) {
  if (x.dtype().is(py::dtype::of<float>()))
    body(float{});
  else if (x.dtype().is(py::dtype::of<double>()))
    body(double{});
  else if (x.dtype().is(element<f16_tag>::dtype()))
    body(f16_tag{});
  else if (x.dtype().is(element<bf16_tag>::dtype()))
    body(bf16_tag{});
  else
    throw py::type_error(std::string(name) + " must be float32, float64, float16 or bfloat16");
}

#define SMAX_PY_UNARY(name)                                                                   \
  m.def(#name, [](py::array x, py::array y, std::size_t threads) {                          \
    by_dtype(x, "x", [&](auto tag) {                                                          \
      using T = decltype(tag);                                                                \
      const auto X = rows_view<T>(x, "x", false);                                             \
      const auto Y = rows_view<T>(y, "out", true);                                            \
      call(SMAX_PY_FN(T, name##_batched), X.data, X.ld, Y.data, Y.ld, X.rows, X.cols, threads); \
    });                                                                                       \
  });

#define SMAX_PY_BINARY(name)                                                                       \
  m.def(#name, [](py::array a, py::array b, py::array dx, std::size_t threads) {                   \
    by_dtype(a, "x", [&](auto tag) {                                                               \
      using T = decltype(tag);                                                                     \
      const auto A = rows_view<T>(a, "a", false), B = rows_view<T>(b, "dy", false);                \
      const auto D = rows_view<T>(dx, "out", true);                                                \
      call(SMAX_PY_FN(T, name##_batched), A.data, A.ld, B.data, B.ld, D.data, D.ld, A.rows, A.cols, threads); \
    });                                                                                            \
  });

}  // namespace

PYBIND11_MODULE(_smax, m) {
  m.doc() = "smax's compiled kernels (use the package smax, not this module)";
  m.def("active_isa", [] { return std::string(smax_active_isa()); });
  m.def("available_isas", [] {
    const char* names[8];
    const std::size_t n = smax_available_isas(names, 8);
    py::list l;
    for (std::size_t i = 0; i < n && i < 8; ++i) l.append(names[i]);
    return l;
  });
  m.def("set_isa", [](py::object isa) {
    if (isa.is_none()) return raise(smax_set_isa(nullptr));
    const std::string s = py::str(isa);
    raise(smax_set_isa(s.c_str()));
  });
  m.def("version", [] { return std::string(smax_version()); });
  m.def("gumbel_row_seed", [](std::uint64_t seed, std::uint64_t r) { return smax_gumbel_row_seed(seed, r); });

  m.def("softmax", [](py::array x, py::array y, int algorithm, std::size_t threads) {
    // (a value outside the enum's range may not even be formed in C++)
    if (algorithm < SMAX_AUTOMATIC || algorithm > SMAX_ONLINE) throw py::value_error("algorithm out of range");
    by_dtype(x, "x", [&](auto tag) {
      using T = decltype(tag);
      const auto X = rows_view<T>(x, "x", false);
      const auto Y = rows_view<T>(y, "out", true);
      call(SMAX_PY_FN(T, softmax_batched), X.data, X.ld, Y.data, Y.ld, X.rows, X.cols,
           static_cast<smax_algorithm>(algorithm), threads);
    });
  });
  SMAX_PY_UNARY(log_softmax)
  SMAX_PY_UNARY(sparsemax)
  SMAX_PY_UNARY(entmax15)
  SMAX_PY_UNARY(stablemax)
  SMAX_PY_UNARY(log_stablemax)
  m.def("entmax_bisect", [](py::array x, py::array y, double alpha, int n_iter, std::size_t threads) {
    by_dtype(x, "x", [&](auto tag) {
      using T = decltype(tag);
      using S = scalar_t<T>;
      const auto X = rows_view<T>(x, "x", false);
      const auto Y = rows_view<T>(y, "out", true);
      call(SMAX_PY_FN(T, entmax_bisect_batched), X.data, X.ld, Y.data, Y.ld, X.rows, X.cols, S(alpha), n_iter,
           threads);
    });
  });
  m.def("softpick", [](py::array x, py::array y, double eps, std::size_t threads) {
    by_dtype(x, "x", [&](auto tag) {
      using T = decltype(tag);
      using S = scalar_t<T>;
      const auto X = rows_view<T>(x, "x", false);
      const auto Y = rows_view<T>(y, "out", true);
      call(SMAX_PY_FN(T, softpick_batched), X.data, X.ld, Y.data, Y.ld, X.rows, X.cols, S(eps), threads);
    });
  });
  m.def("ssmax", [](py::array x, py::array y, double s, double b, std::size_t threads) {
    by_dtype(x, "x", [&](auto tag) {
      using T = decltype(tag);
      using S = scalar_t<T>;
      const auto X = rows_view<T>(x, "x", false);
      const auto Y = rows_view<T>(y, "out", true);
      call(SMAX_PY_FN(T, ssmax_batched), X.data, X.ld, Y.data, Y.ld, X.rows, X.cols, S(s), S(b), threads);
    });
  });
  // vector = true: one row, keyed by seed itself (the single-vector C++
  // function); otherwise row r is keyed by gumbel_row_seed(seed, r).
  m.def("gumbel_softmax", [](py::array x, py::array y, double tau, std::uint64_t seed, bool hard, bool vector,
                             std::size_t threads) {
    by_dtype(x, "logits", [&](auto tag) {
      using T = decltype(tag);
      using S = scalar_t<T>;
      const auto X = rows_view<T>(x, "logits", false);
      const auto Y = rows_view<T>(y, "out", true);
      if (vector && X.rows == 1)
        call(SMAX_PY_FN(T, gumbel_softmax), static_cast<const storage_t<T>*>(X.data), Y.data, X.cols, S(tau), seed, int(hard));
      else
        call(SMAX_PY_FN(T, gumbel_softmax_batched), X.data, X.ld, Y.data, Y.ld, X.rows, X.cols, S(tau), seed,
             int(hard), threads);
    });
  });
  m.def("gumbel_noise", [](py::array g, std::uint64_t seed, std::uint64_t offset) {
    by_dtype(g, "out", [&](auto tag) {
      using T = decltype(tag);
      const auto G = rows_view<T>(g, "out", true);
      if (G.rows > 1 && G.ld != G.cols) throw py::value_error("out must be contiguous here");
      call(SMAX_PY_FN(T, gumbel_noise), G.data, G.rows * G.cols, seed, offset);
    });
  });
  SMAX_PY_BINARY(softmax_backward)
  SMAX_PY_BINARY(log_softmax_backward)
  SMAX_PY_BINARY(sparsemax_backward)
  SMAX_PY_BINARY(stablemax_backward)
  m.def("entmax_backward", [](py::array y, py::array dy, py::array dx, double alpha, std::size_t threads) {
    by_dtype(y, "y", [&](auto tag) {
      using T = decltype(tag);
      using S = scalar_t<T>;
      const auto Y = rows_view<T>(y, "y", false), G = rows_view<T>(dy, "dy", false);
      const auto D = rows_view<T>(dx, "out", true);
      call(SMAX_PY_FN(T, entmax_backward_batched), Y.data, Y.ld, G.data, G.ld, D.data, D.ld, Y.rows, Y.cols,
           S(alpha), threads);
    });
  });
  m.def("softpick_backward", [](py::array x, py::array y, py::array dy, py::array dx, double eps,
                                std::size_t threads) {
    by_dtype(x, "x", [&](auto tag) {
      using T = decltype(tag);
      using S = scalar_t<T>;
      const auto X = rows_view<T>(x, "x", false), Y = rows_view<T>(y, "y", false);
      const auto G = rows_view<T>(dy, "dy", false), D = rows_view<T>(dx, "out", true);
      call(SMAX_PY_FN(T, softpick_backward_batched), X.data, X.ld, Y.data, Y.ld, G.data, G.ld, D.data, D.ld,
           X.rows, X.cols, S(eps), threads);
    });
  });
}
