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

// A 2-D array's rows as the C API wants them: pointer, shape, row stride in
// elements. `name` is the Python argument's name, for the error text.
template <class T>
struct rows_of {
  T* data;
  std::size_t rows, cols, ld;
};

template <class T>
rows_of<T> rows_view(py::array& a, const char* name, bool writable) {
  if (a.ndim() != 2) throw py::value_error(std::string(name) + " must be 2-D here");
  if (!a.dtype().is(py::dtype::of<T>())) throw py::type_error(std::string(name) + " has the wrong dtype");
  const auto rows = static_cast<std::size_t>(a.shape(0)), cols = static_cast<std::size_t>(a.shape(1));
  const auto s0 = a.strides(0), s1 = a.strides(1);
  if (cols > 1 && s1 != static_cast<py::ssize_t>(sizeof(T)))
    throw py::value_error(std::string(name) + "'s rows must be contiguous");
  std::size_t ld = cols;
  if (rows > 1) {
    if (s0 < 0 || s0 % static_cast<py::ssize_t>(sizeof(T)) != 0)
      throw py::value_error(std::string(name) + " has a negative or misaligned row stride");
    ld = static_cast<std::size_t>(s0) / sizeof(T);
  }
  T* p = writable ? static_cast<T*>(a.mutable_data()) : static_cast<T*>(const_cast<void*>(a.data()));
  return {p, rows, cols, ld};
}

template <class T, class F, class D>
constexpr auto pick(F f, D d) {
  if constexpr (std::is_same<T, float>::value)
    return f;
  else
    return d;
}
#define SMAX_PY_FN(T, name) pick<T>(&smax_##name##_f32, &smax_##name##_f64)

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

// Calls body.template operator()<T>() for x's dtype, float32 or float64.
template <class B>
void by_dtype(const py::array& x, const char* name, B&& body) {
  if (x.dtype().is(py::dtype::of<float>()))
    body(float{});
  else if (x.dtype().is(py::dtype::of<double>()))
    body(double{});
  else
    throw py::type_error(std::string(name) + " must be float32 or float64");
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
      const auto X = rows_view<T>(x, "x", false);
      const auto Y = rows_view<T>(y, "out", true);
      call(SMAX_PY_FN(T, entmax_bisect_batched), X.data, X.ld, Y.data, Y.ld, X.rows, X.cols, T(alpha), n_iter,
           threads);
    });
  });
  m.def("softpick", [](py::array x, py::array y, double eps, std::size_t threads) {
    by_dtype(x, "x", [&](auto tag) {
      using T = decltype(tag);
      const auto X = rows_view<T>(x, "x", false);
      const auto Y = rows_view<T>(y, "out", true);
      call(SMAX_PY_FN(T, softpick_batched), X.data, X.ld, Y.data, Y.ld, X.rows, X.cols, T(eps), threads);
    });
  });
  m.def("ssmax", [](py::array x, py::array y, double s, double b, std::size_t threads) {
    by_dtype(x, "x", [&](auto tag) {
      using T = decltype(tag);
      const auto X = rows_view<T>(x, "x", false);
      const auto Y = rows_view<T>(y, "out", true);
      call(SMAX_PY_FN(T, ssmax_batched), X.data, X.ld, Y.data, Y.ld, X.rows, X.cols, T(s), T(b), threads);
    });
  });
  // vector = true: one row, keyed by seed itself (the single-vector C++
  // function); otherwise row r is keyed by gumbel_row_seed(seed, r).
  m.def("gumbel_softmax", [](py::array x, py::array y, double tau, std::uint64_t seed, bool hard, bool vector,
                             std::size_t threads) {
    by_dtype(x, "logits", [&](auto tag) {
      using T = decltype(tag);
      const auto X = rows_view<T>(x, "logits", false);
      const auto Y = rows_view<T>(y, "out", true);
      if (vector && X.rows == 1)
        call(SMAX_PY_FN(T, gumbel_softmax), static_cast<const T*>(X.data), Y.data, X.cols, T(tau), seed, int(hard));
      else
        call(SMAX_PY_FN(T, gumbel_softmax_batched), X.data, X.ld, Y.data, Y.ld, X.rows, X.cols, T(tau), seed,
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
      const auto Y = rows_view<T>(y, "y", false), G = rows_view<T>(dy, "dy", false);
      const auto D = rows_view<T>(dx, "out", true);
      call(SMAX_PY_FN(T, entmax_backward_batched), Y.data, Y.ld, G.data, G.ld, D.data, D.ld, Y.rows, Y.cols,
           T(alpha), threads);
    });
  });
  m.def("softpick_backward", [](py::array x, py::array y, py::array dy, py::array dx, double eps,
                                std::size_t threads) {
    by_dtype(x, "x", [&](auto tag) {
      using T = decltype(tag);
      const auto X = rows_view<T>(x, "x", false), Y = rows_view<T>(y, "y", false);
      const auto G = rows_view<T>(dy, "dy", false), D = rows_view<T>(dx, "out", true);
      call(SMAX_PY_FN(T, softpick_backward_batched), X.data, X.ld, Y.data, Y.ld, G.data, G.ld, D.data, D.ld,
           X.rows, X.cols, T(eps), threads);
    });
  });
}
