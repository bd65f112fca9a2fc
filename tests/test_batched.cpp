// Batched rows and multi-core execution: per-row equality with the vector
// API, strides, in place, determinism across thread counts, long rows split
// into blocks, and shape errors.
#include <cstring>

#include <smax/parallel.hpp>

#include "common.hpp"
#include "registry.hpp"

namespace {

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace

TEST_CASE("batched rows equal the vector API row by row, with strides", "[batched]") {
  smax::thread_pool pool(3);
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    // 1100: rows of >= 4 KiB, >= 1 MiB in all, with gaps that on AMD the
    // batched loop touches after each row (row_gaps, batched.hpp).
    for (std::size_t cols : {1, 7, 33, 1000, 1100}) {
      const bool large = cols == 1100;
      const std::size_t rows = large ? 256 : 37, ldx = cols + (large ? 300 : 3), ldy = cols + (large ? 305 : 5);
      const auto x = smax_test::normal<float>(rows * ldx, 4.0, cols);
      std::vector<float> y(rows * ldy, -7.0f), ly(rows * ldy, -7.0f);
      smax::dynamic::softmax(smax::matrix_view<const float>(x.data(), rows, cols, ldx),
                             smax::matrix_view<float>(y.data(), rows, cols, ldy), smax::algorithm::automatic, &pool);
      smax::dynamic::log_softmax(smax::matrix_view<const float>(x.data(), rows, cols, ldx),
                                 smax::matrix_view<float>(ly.data(), rows, cols, ldy), &pool);
      std::vector<float> row(cols), lrow(cols);
      for (std::size_t r = 0; r < rows; ++r) {
        smax::dynamic::softmax(x.data() + r * ldx, row.data(), cols);
        smax::dynamic::log_softmax(x.data() + r * ldx, lrow.data(), cols);
        INFO("isa " << isa << " cols " << cols << " row " << r);
        CHECK(std::memcmp(row.data(), y.data() + r * ldy, cols * sizeof(float)) == 0);
        CHECK(std::memcmp(lrow.data(), ly.data() + r * ldy, cols * sizeof(float)) == 0);
        // The padding between rows is untouched.
        for (std::size_t c = cols; c < ldy; ++c) {
          CHECK(y[r * ldy + c] == -7.0f);
          CHECK(ly[r * ldy + c] == -7.0f);
        }
      }
    }
  }
}

TEST_CASE("batched output is bitwise identical for 1, 2, 3 and 8 threads", "[batched]") {
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    // A batch of rows, and one row long enough to be split into blocks
    // (split_cols = 2^18), with a length that leaves a partial last block.
    const std::vector<std::pair<std::size_t, std::size_t>> shapes = {{64, 3000}, {1, (std::size_t(1) << 20) + 12345}};
    for (const auto& shape : shapes) {
      const std::size_t rows = shape.first, cols = shape.second;
      const auto x = smax_test::normal<float>(rows * cols, 6.0, rows + cols);
      std::vector<float> first, first_log;
      for (std::size_t threads : {1, 2, 3, 8}) {
        smax::thread_pool pool(threads);
        std::vector<float> y(rows * cols), ly(rows * cols);
        smax::dynamic::softmax(smax::matrix_view<const float>(x.data(), rows, cols),
                               smax::matrix_view<float>(y.data(), rows, cols), smax::algorithm::automatic, &pool);
        smax::dynamic::log_softmax(smax::matrix_view<const float>(x.data(), rows, cols),
                                   smax::matrix_view<float>(ly.data(), rows, cols), &pool);
        if (first.empty()) {
          first = y;
          first_log = ly;
          // The first result is also right, not just repeatable.
          std::vector<float> row0(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(cols));
          std::vector<float> out0(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(cols));
          CHECK(smax_test::max_rel_err(out0, smax_test::ref_softmax(row0)) < 1e-6);
        }
        INFO("isa " << isa << " rows " << rows << " cols " << cols << " threads " << threads);
        CHECK(bitwise_equal(y, first));
        CHECK(bitwise_equal(ly, first_log));
      }
      // Without an executor: the same bits again.
      std::vector<float> y(rows * cols);
      smax::dynamic::softmax(smax::matrix_view<const float>(x.data(), rows, cols),
                             smax::matrix_view<float>(y.data(), rows, cols));
      CHECK(bitwise_equal(y, first));
    }
  }
}

TEST_CASE("a long row split into blocks keeps the accuracy and special-value rules", "[batched]") {
  smax::thread_pool pool(2);
  const std::size_t n = (std::size_t(1) << 19) + 77;
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    INFO("isa " << isa);
    // Accuracy in double and float, values spread so blocks have different maxima.
    auto xd = smax_test::normal<double>(n, 8.0, 5);
    xd[n - 3] = 60.0;  // the max sits in the last block
    std::vector<double> yd(n);
    smax::dynamic::softmax(smax::matrix_view<const double>(xd.data(), 1, n), smax::matrix_view<double>(yd.data(), 1, n),
                           smax::algorithm::automatic, &pool);
    CHECK(smax_test::max_rel_err(yd, smax_test::ref_softmax(xd)) < 1e-13);
    auto xf = smax_test::normal<float>(n, 8.0, 6);
    std::vector<float> yf(n), lf(n);
    smax::dynamic::softmax(smax::matrix_view<const float>(xf.data(), 1, n), smax::matrix_view<float>(yf.data(), 1, n),
                           smax::algorithm::automatic, &pool);
    CHECK(smax_test::max_rel_err(yf, smax_test::ref_softmax(xf)) < 1e-6);
    smax::dynamic::log_softmax(smax::matrix_view<const float>(xf.data(), 1, n), smax::matrix_view<float>(lf.data(), 1, n),
                               &pool);
    double worst = 0;
    const auto ref = smax_test::ref_softmax(xf);
    for (std::size_t i = 0; i < n; ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(lf[i] - std::log(ref[i])) / std::max(1.0L, std::fabs(std::log(ref[i])))));
    CHECK(worst < 1e-6);

    // NaN in one block -> all NaN; +inf entries share; all -inf -> zeros.
    auto bad = xf;
    bad[n / 2] = std::numeric_limits<float>::quiet_NaN();
    smax::dynamic::softmax(smax::matrix_view<const float>(bad.data(), 1, n), smax::matrix_view<float>(yf.data(), 1, n),
                           smax::algorithm::automatic, &pool);
    CHECK(std::all_of(yf.begin(), yf.end(), [](float v) { return std::isnan(v); }));
    bad = xf;
    bad[10] = bad[n - 10] = std::numeric_limits<float>::infinity();
    smax::dynamic::softmax(smax::matrix_view<const float>(bad.data(), 1, n), smax::matrix_view<float>(yf.data(), 1, n),
                           smax::algorithm::automatic, &pool);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += yf[i] != ((i == 10 || i == n - 10) ? 0.5f : 0.0f);
    CHECK(wrong == 0);
    std::vector<float> masked(n, -std::numeric_limits<float>::infinity());
    smax::dynamic::softmax(smax::matrix_view<const float>(masked.data(), 1, n), smax::matrix_view<float>(yf.data(), 1, n),
                           smax::algorithm::automatic, &pool);
    CHECK(std::all_of(yf.begin(), yf.end(), [](float v) { return v == 0.0f; }));
    // In place.
    auto inplace = xf;
    smax::dynamic::softmax(smax::matrix_view<const float>(inplace.data(), 1, n),
                           smax::matrix_view<float>(inplace.data(), 1, n), smax::algorithm::automatic, &pool);
    smax::dynamic::softmax(smax::matrix_view<const float>(xf.data(), 1, n), smax::matrix_view<float>(yf.data(), 1, n),
                           smax::algorithm::automatic, &pool);
    CHECK(bitwise_equal(inplace, yf));

    // log_softmax: the same rules through its two-pass blocks and their
    // fallback (NaN, +inf, all -inf).
    const auto logs = [&](const std::vector<float>& in, std::vector<float>& out) {
      smax::dynamic::log_softmax(smax::matrix_view<const float>(in.data(), 1, n), smax::matrix_view<float>(out.data(), 1, n),
                                 &pool);
    };
    constexpr float inf = std::numeric_limits<float>::infinity();
    bad = xf;
    bad[n / 2] = std::numeric_limits<float>::quiet_NaN();
    logs(bad, lf);
    CHECK(std::all_of(lf.begin(), lf.end(), [](float v) { return std::isnan(v); }));
    bad = xf;
    bad[10] = bad[n - 10] = inf;
    logs(bad, lf);
    wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
      wrong += lf[i] != ((i == 10 || i == n - 10) ? static_cast<float>(-std::log(2.0)) : -inf);
    CHECK(wrong == 0);
    logs(masked, lf);
    CHECK(std::all_of(lf.begin(), lf.end(), [](float v) { return v == -std::numeric_limits<float>::infinity(); }));
    // -inf entries in a finite row: -inf there, every other output as without them.
    std::vector<float> plain(n);
    logs(xf, plain);
    bad = xf;
    bad[5] = bad[n - 5] = -inf;
    logs(bad, lf);
    wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
      wrong += (i == 5 || i == n - 5) ? lf[i] != -inf : !(std::fabs(lf[i] - plain[i]) <= 1e-6f * std::max(1.0f, std::fabs(plain[i])));
    CHECK(wrong == 0);
    inplace = xf;
    logs(inplace, inplace);
    CHECK(bitwise_equal(inplace, plain));
    // Large offsets keep double's accuracy (log s - (m - E ln2), ln2 in two parts).
    auto xo = xd;
    for (double& v : xo) v += 1000.0;
    smax::dynamic::log_softmax(smax::matrix_view<const double>(xo.data(), 1, n), smax::matrix_view<double>(yd.data(), 1, n),
                               &pool);
    const auto lref = smax_test::ref_log_softmax(xo);
    double worst_d = 0;
    for (std::size_t i = 0; i < n; ++i)
      worst_d = std::max(worst_d, static_cast<double>(std::fabs(yd[i] - lref[i]) / std::max<long double>(1, std::fabs(lref[i]))));
    CHECK(worst_d < 2e-14);
  }
}

TEST_CASE("batched shape errors throw std::invalid_argument", "[batched]") {
  std::vector<float> x(100), y(100);
  using MC = smax::matrix_view<const float>;
  using M = smax::matrix_view<float>;
  CHECK_THROWS_AS(smax::dynamic::softmax(MC(x.data(), 10, 10, 5), M(y.data(), 10, 10)), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::softmax(MC(x.data(), 10, 10), M(y.data(), 10, 10, 9)), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::softmax(MC(x.data(), 10, 10), M(y.data(), 9, 10)), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::log_softmax(MC(nullptr, 10, 10), M(y.data(), 10, 10)), std::invalid_argument);
  // Empty matrices are fine, null or not.
  CHECK_NOTHROW(smax::dynamic::softmax(MC(nullptr, 0, 10), M(nullptr, 0, 10)));
  CHECK_NOTHROW(smax::dynamic::softmax(MC(nullptr, 10, 0), M(nullptr, 10, 0)));
}

TEST_CASE("executors: function_executor and a reused pool", "[batched]") {
  std::size_t calls = 0;
  smax::function_executor serial(
      [&](std::size_t count, const std::function<void(std::size_t)>& task) {
        for (std::size_t i = count; i-- > 0;) {  // reverse order: order must not matter
          ++calls;
          task(i);
        }
      },
      4);
  const std::size_t rows = 300, cols = 1000;
  const auto x = smax_test::normal<float>(rows * cols, 3.0, 1);
  std::vector<float> a(rows * cols), b(rows * cols);
  smax::dynamic::softmax(smax::matrix_view<const float>(x.data(), rows, cols), smax::matrix_view<float>(a.data(), rows, cols),
                         smax::algorithm::automatic, &serial);
  CHECK(calls > 1);
  smax::thread_pool pool(4);
  for (int rep = 0; rep < 50; ++rep) {  // many jobs on one pool: no lost or stale tasks
    std::fill(b.begin(), b.end(), 0.0f);
    smax::dynamic::softmax(smax::matrix_view<const float>(x.data(), rows, cols),
                           smax::matrix_view<float>(b.data(), rows, cols), smax::algorithm::automatic, &pool);
    REQUIRE(bitwise_equal(a, b));
  }
}

namespace {

// Every batched function of the rest of the family as (inputs, output) on
// matrices of one shape; `rows` is the single-vector function of one row.
template <class T>
struct batched_fn {
  const char* name;
  // x, y (a genuine forward output where the function reads one), dy -> out
  void (*matrix)(smax::matrix_view<const T> x, smax::matrix_view<const T> y, smax::matrix_view<const T> dy,
                 smax::matrix_view<T> out, smax::executor* ex);
  void (*row)(const T* x, const T* y, const T* dy, T* out, std::size_t n, std::size_t r);
};

// One function per name of SMAX_BATCHED_FUNCTIONS (dispatch.hpp), each
// adding its entries: the list below is generated from the registry, so a
// batched function registered without its batched_calls_NAME does not
// compile.
template <class T>
using batched_table = std::vector<batched_fn<T>>;

namespace d = smax::dynamic;
template <class T>
using MC = smax::matrix_view<const T>;
template <class T>
using M = smax::matrix_view<T>;
using E = smax::executor*;

// Tested by cases of their own: softmax and log_softmax (and their
// backward passes, below) here above; topk_softmax and sample, whose
// outputs are indices, in test_topk.cpp.
template <class T>
void batched_calls_softmax(batched_table<T>&) {}
template <class T>
void batched_calls_log_softmax(batched_table<T>&) {}
template <class T>
void batched_calls_topk_softmax(batched_table<T>&) {}
template <class T>
void batched_calls_sample(batched_table<T>&) {}

template <class T>
void batched_calls_sparsemax(batched_table<T>& v) {
  v.insert(v.end(), {
    {"sparsemax", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::sparsemax(x, o, ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t) { d::sparsemax(x, o, n); }},
  });
}
template <class T>
void batched_calls_entmax15(batched_table<T>& v) {
  v.insert(v.end(), {
    {"entmax15", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::entmax15(x, o, ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t) { d::entmax15(x, o, n); }},
  });
}
template <class T>
void batched_calls_entmax_bisect(batched_table<T>& v) {
  v.insert(v.end(), {
    {"entmax_bisect", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::entmax_bisect(x, o, T(1.3), 20, ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t) { d::entmax_bisect(x, o, n, T(1.3), 20); }},
  });
}
template <class T>
void batched_calls_stablemax(batched_table<T>& v) {
  v.insert(v.end(), {
    {"stablemax", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::stablemax(x, o, ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t) { d::stablemax(x, o, n); }},
  });
}
template <class T>
void batched_calls_log_stablemax(batched_table<T>& v) {
  v.insert(v.end(), {
    {"log_stablemax", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::log_stablemax(x, o, ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t) { d::log_stablemax(x, o, n); }},
  });
}
template <class T>
void batched_calls_softpick(batched_table<T>& v) {
  v.insert(v.end(), {
    {"softpick", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::softpick(x, o, T(1e-3), ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t) { d::softpick(x, o, n, T(1e-3)); }},
  });
}
template <class T>
void batched_calls_ssmax(batched_table<T>& v) {
  v.insert(v.end(), {
    {"ssmax", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::ssmax(x, o, T(0.43), T(0.2), ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t) { d::ssmax(x, o, n, T(0.43), T(0.2)); }},
  });
}
template <class T>
void batched_calls_gumbel_softmax(batched_table<T>& v) {
  v.insert(v.end(), {
    {"gumbel_softmax", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::gumbel_softmax(x, o, T(0.6), 99, false, ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t r) {
       d::gumbel_softmax(x, o, n, T(0.6), smax::gumbel_row_seed(99, r));
     }},
    {"gumbel_softmax/hard", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::gumbel_softmax(x, o, T(0.6), 99, true, ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t r) {
       d::gumbel_softmax(x, o, n, T(0.6), smax::gumbel_row_seed(99, r), true);
     }},
  });
}
template <class T>
void batched_calls_softmax_backward(batched_table<T>& v) {
  v.insert(v.end(), {
    {"softmax_backward", [](MC<T>, MC<T> y, MC<T> dy, M<T> o, E ex) { d::softmax_backward(y, dy, o, ex); },
     [](const T*, const T* y, const T* dy, T* o, std::size_t n, std::size_t) { d::softmax_backward(y, dy, o, n); }},
  });
}
template <class T>
void batched_calls_log_softmax_backward(batched_table<T>& v) {
  v.insert(v.end(), {
    {"log_softmax_backward", [](MC<T>, MC<T> y, MC<T> dy, M<T> o, E ex) { d::log_softmax_backward(y, dy, o, ex); },
     [](const T*, const T* y, const T* dy, T* o, std::size_t n, std::size_t) { d::log_softmax_backward(y, dy, o, n); }},
  });
}
template <class T>
void batched_calls_sparsemax_backward(batched_table<T>& v) {
  v.insert(v.end(), {
    {"sparsemax_backward", [](MC<T>, MC<T> y, MC<T> dy, M<T> o, E ex) { d::sparsemax_backward(y, dy, o, ex); },
     [](const T*, const T* y, const T* dy, T* o, std::size_t n, std::size_t) { d::sparsemax_backward(y, dy, o, n); }},
  });
}
template <class T>
void batched_calls_entmax_backward(batched_table<T>& v) {
  v.insert(v.end(), {
    {"entmax_backward", [](MC<T>, MC<T> y, MC<T> dy, M<T> o, E ex) { d::entmax_backward(y, dy, o, T(1.5), ex); },
     [](const T*, const T* y, const T* dy, T* o, std::size_t n, std::size_t) { d::entmax_backward(y, dy, o, n, T(1.5)); }},
  });
}
template <class T>
void batched_calls_stablemax_backward(batched_table<T>& v) {
  v.insert(v.end(), {
    {"stablemax_backward", [](MC<T> x, MC<T>, MC<T> dy, M<T> o, E ex) { d::stablemax_backward(x, dy, o, ex); },
     [](const T* x, const T*, const T* dy, T* o, std::size_t n, std::size_t) { d::stablemax_backward(x, dy, o, n); }},
  });
}
template <class T>
void batched_calls_softpick_backward(batched_table<T>& v) {
  v.insert(v.end(), {
    {"softpick_backward", [](MC<T> x, MC<T> y, MC<T> dy, M<T> o, E ex) { d::softpick_backward(x, y, dy, o, T(1e-3), ex); },
     [](const T* x, const T* y, const T* dy, T* o, std::size_t n, std::size_t) {
       d::softpick_backward(x, y, dy, o, n, T(1e-3));
     }},
  });
}
template <class T>
void batched_calls_sigmoid_attention(batched_table<T>& v) {
  v.insert(v.end(), {
    {"sigmoid_attention", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::sigmoid_attention(x, o, T(-2), ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t) { d::sigmoid_attention(x, o, n, T(-2)); }},
  });
}
template <class T>
void batched_calls_sigmoid_attention_backward(batched_table<T>& v) {
  v.insert(v.end(), {
    {"sigmoid_attention_backward",
     [](MC<T> x, MC<T> y, MC<T> dy, M<T> o, E ex) { d::sigmoid_attention_backward(x, y, dy, o, T(-2), ex); },
     [](const T* x, const T* y, const T* dy, T* o, std::size_t n, std::size_t) {
       d::sigmoid_attention_backward(x, y, dy, o, n, T(-2));
     }},
  });
}
template <class T>
void batched_calls_sa_softmax(batched_table<T>& v) {
  v.insert(v.end(), {
    {"sa_softmax", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::sa_softmax(x, o, true, ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t) { d::sa_softmax(x, o, n, true); }},
  });
}
template <class T>
void batched_calls_sa_softmax_backward(batched_table<T>& v) {
  v.insert(v.end(), {
    {"sa_softmax_backward", [](MC<T> x, MC<T> y, MC<T> dy, M<T> o, E ex) { d::sa_softmax_backward(x, y, dy, o, false, ex); },
     [](const T* x, const T* y, const T* dy, T* o, std::size_t n, std::size_t) {
       d::sa_softmax_backward(x, y, dy, o, n, false);
     }},
  });
}
template <class T>
void batched_calls_multimax(batched_table<T>& v) {
  v.insert(v.end(), {
    {"multimax", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::multimax(x, o, smax_test::some_multimax_params(), ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t) {
       d::multimax(x, o, n, smax_test::some_multimax_params());
     }},
  });
}
template <class T>
void batched_calls_multimax_backward(batched_table<T>& v) {
  v.insert(v.end(), {
    {"multimax_backward",
     [](MC<T> x, MC<T> y, MC<T> dy, M<T> o, E ex) { d::multimax_backward(x, y, dy, o, smax_test::some_multimax_params(), ex); },
     [](const T* x, const T* y, const T* dy, T* o, std::size_t n, std::size_t) {
       d::multimax_backward(x, y, dy, o, n, smax_test::some_multimax_params());
     }},
  });
}
template <class T>
void batched_calls_asentmax(batched_table<T>& v) {
  v.insert(v.end(), {
    {"asentmax", [](MC<T> x, MC<T>, MC<T>, M<T> o, E ex) { d::asentmax(x, o, T(1.5), T(0.5), T(1), ex); },
     [](const T* x, const T*, const T*, T* o, std::size_t n, std::size_t) {
       d::asentmax(x, o, n, T(1.5), T(0.5), T(1));
     }},
  });
}
template <class T>
void batched_calls_asentmax_backward(batched_table<T>& v) {
  v.insert(v.end(), {
    {"asentmax_backward",
     [](MC<T> x, MC<T> y, MC<T> dy, M<T> o, E ex) { d::asentmax_backward(x, y, dy, o, T(1.5), T(0.5), T(1), ex); },
     [](const T* x, const T* y, const T* dy, T* o, std::size_t n, std::size_t) {
       d::asentmax_backward(x, y, dy, o, n, T(1.5), T(0.5), T(1));
     }},
  });
}

#define SMAX_TEST_BATCHED_CALLS(name, params, args) batched_calls_##name<T>(v);
template <class T>
batched_table<T> rest_of_family() {
  batched_table<T> v;
  SMAX_BATCHED_FUNCTIONS(T, SMAX_TEST_BATCHED_CALLS)
  return v;
}
#undef SMAX_TEST_BATCHED_CALLS

template <class T>
void rest_of_family_rows(const std::string& isa) {
  smax::thread_pool pool3(3);
  struct shape {
    std::size_t cols, rows, gap;
  };
  // The last: rows of >= 4 KiB, >= 1 MiB in all, gaps of 300 and 302
  // elements between them, which on AMD the batched loops touch after each
  // row (row_gaps, batched.hpp).
  for (const shape sh : {shape{1, 23, 3}, shape{9, 23, 3}, shape{70, 23, 3}, shape{1500, 23, 3}, shape{1100, 256, 300}}) {
    const std::size_t cols = sh.cols, rows = sh.rows, ld = cols + sh.gap;
    const auto x = smax_test::normal<T>(rows * ld, 3.0, cols + 1);
    const auto dy = smax_test::normal<T>(rows * ld, 1.0, cols + 2);
    // y: a probability-like matrix (the softmax of x) for the backward passes.
    std::vector<T> y(rows * ld, T(0));
    for (std::size_t r = 0; r < rows; ++r) smax::dynamic::softmax(x.data() + r * ld, y.data() + r * ld, cols);
    const smax::matrix_view<const T> X(x.data(), rows, cols, ld), Y(y.data(), rows, cols, ld), DY(dy.data(), rows, cols, ld);
    if (sh.gap == 300) {
      const smax::matrix_view<T> out(nullptr, rows, cols, ld + 2);
      CHECK((smax::detail::row_gaps(X).count == 1) == smax::detail::gap_breaks_stream());
      CHECK((smax::detail::row_gaps(out).count == 1) == smax::detail::gap_breaks_stream());
    }
    for (const auto& f : rest_of_family<T>()) {
      INFO("isa " << isa << " " << f.name << " cols " << cols);
      std::vector<T> one(rows * (ld + 2), T(-7)), three(rows * (ld + 2), T(-7)), row(cols);
      f.matrix(X, Y, DY, smax::matrix_view<T>(one.data(), rows, cols, ld + 2), nullptr);
      f.matrix(X, Y, DY, smax::matrix_view<T>(three.data(), rows, cols, ld + 2), &pool3);
      CHECK(bitwise_equal(one, three));  // any thread count: the same bits
      bool rows_equal = true, padding_kept = true;
      for (std::size_t r = 0; r < rows; ++r) {
        f.row(x.data() + r * ld, y.data() + r * ld, dy.data() + r * ld, row.data(), cols, r);
        rows_equal = rows_equal && std::memcmp(row.data(), one.data() + r * (ld + 2), cols * sizeof(T)) == 0;
        for (std::size_t c = cols; c < ld + 2; ++c) padding_kept = padding_kept && one[r * (ld + 2) + c] == T(-7);
      }
      CHECK(rows_equal);
      CHECK(padding_kept);
    }
  }
}

}  // namespace

TEST_CASE("batched forms of the whole family equal the vector functions row by row, any thread count", "[batched]") {
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    rest_of_family_rows<float>(isa);
    rest_of_family_rows<double>(isa);
  }
}

TEST_CASE("batched forms check their arguments before any row runs", "[batched]") {
  std::vector<float> a(64, 0.5f), b(64, -3.0f);
  const smax::matrix_view<const float> x(a.data(), 4, 8, 8), bad(a.data(), 4, 8, 4);
  const smax::matrix_view<float> y(b.data(), 4, 8, 8), small(b.data(), 3, 8, 8);
  CHECK_THROWS_AS(smax::dynamic::sparsemax(bad, y), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::stablemax(x, small), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::entmax_bisect(x, y, 0.5f), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::softpick(x, y, -1.0f), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::ssmax(x, y, std::numeric_limits<float>::infinity()), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::ssmax(x, y, 2e38f, 2e38f), std::invalid_argument);  // s log 8 + b overflows float
  CHECK_THROWS_AS(smax::dynamic::gumbel_softmax(x, y, 0.0f, 1), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::entmax_backward(x, x, y, 0.9f), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::softpick_backward(x, x, x, y, std::nanf("")), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::softmax_backward(x, bad, y), std::invalid_argument);
  try {
    smax::dynamic::stablemax_backward(x, bad, y);
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("dy") != std::string::npos);  // the message names the parameter
  }
  for (float v : b) CHECK(v == -3.0f);  // nothing written
  // Rows drawing Gumbel noise get independent seeds.
  CHECK(smax::gumbel_row_seed(1, 0) != smax::gumbel_row_seed(1, 1));
  CHECK(smax::gumbel_row_seed(1, 1) != smax::gumbel_row_seed(2, 0));
}
