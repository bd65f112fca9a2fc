// smax_bench shared helpers: buffers, counters, the ISA loop, the roofline and
// registration. Every bench/bench_*.cpp is globbed into the one smax_bench
// binary (bench/CMakeLists.txt); a new family's file needs only this header.
//
// Adding your kernel (bench/bench_<family>.cpp):
//
//   #include "common.hpp"
//   SMAX_BENCH_REGISTER(sparsemax) {
//     smax_bench::kernel<float> k;
//     k.name = "sparsemax";                 // or "family/variant"
//     k.traffic = {2, 1};                   // minimal arrays read, written per element
//     k.run = [](const float* x, float* y, std::size_t n) { smax::dynamic::sparsemax(x, y, n); };
//     k.check = smax_bench::finite_check<float>;   // optional: run once before timing
//     smax_bench::register_per_isa(k, smax_bench::sizes<float>());
//   }
//
// That registers "<name>/f32/<isa>/<n>" for every ISA compiled in (x86:
// avx512, avx2, sse2) and every size: each run routes smax::dynamic to its ISA
// (SkipWithError when the CPU lacks it), checks the output once, times
// k.run on the shared input, and reports
//   items_per_second   elements per second
//   bytes_per_second   the kernel's own minimal traffic (k.traffic) per second
//   vs_roofline        roofline time / kernel time at the same n, the roofline
//                      ("read twice, write once" unless k.roof says copy)
//                      timed right after the kernel on the same buffers
// Other helpers: register_batched (rows x cols, k.run per row), input<T>(n)
// for a kernel that needs its own data layout, sum_check / compare_check.
//
// Multi-threaded work (register_threaded, k.run_threaded): one call for a
// whole rows x cols matrix on a given number of threads, registered as
//   "<name>/<type>/<isa>/<rows>/<cols>/threads:<t>/real_time"
// (Google Benchmark appends "/real_time"). These are timed on the wall clock
// (the per-thread CPU clock would miss the other threads' work), and so is
// their paired roofline, which is split into t equal parts run concurrently
// on t threads: a t-thread kernel is compared with the t-thread roofline.
// The 1-thread entries use the wall clock too, so that t = 1 and t = 2 are
// comparable; the single-vector benchmarks above keep the CPU clock.
//
// Data: one arena per element type, allocated and first-touched once, x
// filled with logits ~ N(0, 3^2) (deterministic). A call whose x + y is at
// least rotate_min_bytes (16 MiB) rotates through the whole arena (512 MiB),
// so that "out of cache" sizes really come from DRAM; smaller sizes reuse one
// slot and measure the cache they fit in.
#pragma once

#include <benchmark/benchmark.h>
#include <time.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <smax/dynamic.hpp>

namespace smax_bench {

// ------------------------------------------------------------------ names --

template <class T>
inline const char* type_name() {
  return sizeof(T) == 4 ? "f32" : "f64";
}

// Every ISA compiled into smax_bench, whether or not this CPU has it (the
// dispatch helper builds all of them): benchmarks for a missing one report
// SkipWithError instead of silently disappearing.
inline const std::vector<std::string>& compiled_isas() {
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
  static const std::vector<std::string> v = {"avx512", "avx2", "sse2"};
#elif defined(__aarch64__)
  static const std::vector<std::string> v = {"neon"};
#else
  static const std::vector<std::string> v = {};
#endif
  return v;
}

// Routes smax::dynamic to `isa` for the lifetime of the object; ok() is false
// (and the benchmark skipped with an error) when the CPU lacks it.
class isa_scope {
 public:
  isa_scope(benchmark::State& state, const std::string& isa) {
    ok_ = smax::dynamic::set_isa(isa.c_str()) && isa == smax::dynamic::active_isa();
    if (!ok_) state.SkipWithError(("CPU lacks ISA " + isa).c_str());
  }
  ~isa_scope() { smax::dynamic::set_isa(nullptr); }
  isa_scope(const isa_scope&) = delete;
  isa_scope& operator=(const isa_scope&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

// ------------------------------------------------------------------ sizes --

// The full grid: powers of two from 1K elements up to 256 MiB per array
// (64M floats, 32M doubles). tools/run_bench.sh picks a subset by filter.
template <class T>
inline std::vector<std::size_t> sizes() {
  std::vector<std::size_t> v;
  const std::size_t max_n = (std::size_t(256) << 20) / sizeof(T);
  for (std::size_t n = 1024; n <= max_n; n *= 2) v.push_back(n);
  return v;
}

// Batched shape (rows, cols): 2048 x 32768 floats = 256 MiB.
constexpr std::size_t batch_rows = 2048;
constexpr std::size_t batch_cols = 32768;

// ------------------------------------------------------------------- data --

constexpr std::size_t arena_bytes = std::size_t(256) << 20;  // per array (x, y)
constexpr std::size_t rotate_min_bytes = std::size_t(16) << 20;

struct free_deleter {
  void operator()(void* p) const { std::free(p); }
};

// 2 MiB-aligned, zeroed (first-touched) memory.
inline std::unique_ptr<void, free_deleter> touched(std::size_t bytes) {
  constexpr std::size_t align = std::size_t(2) << 20;
  bytes = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, bytes);
  if (!p) {
    std::fprintf(stderr, "smax_bench: out of memory (%zu bytes)\n", bytes);
    std::abort();
  }
  std::memset(p, 0, bytes);
  return std::unique_ptr<void, free_deleter>(p);
}

// Deterministic N(0, 3^2)-like logits: a sum of four uniforms (Irwin-Hall)
// from splitmix64, scaled to variance 9. Cheap enough for 64M elements.
template <class T>
inline void fill_logits(T* x, std::size_t n, std::uint64_t seed = 42) {
  std::uint64_t s = seed;
  const auto next = [&s]() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = next();
    double u = 0;
    for (int k = 0; k < 4; ++k) u += static_cast<double>((r >> (16 * k)) & 0xFFFF) / 65536.0;
    x[i] = static_cast<T>((u - 2.0) * 3.0 * std::sqrt(3.0));  // var of the sum is 4/12
  }
}

// The shared input and output arrays of one element type.
template <class T>
class arena {
 public:
  static arena& get() {
    static arena a;
    return a;
  }
  static constexpr std::size_t elems = arena_bytes / sizeof(T);
  const T* x() const { return static_cast<const T*>(x_.get()); }
  T* y() const { return static_cast<T*>(y_.get()); }

 private:
  arena() : x_(touched(arena_bytes)), y_(touched(arena_bytes)) { fill_logits(static_cast<T*>(x_.get()), elems); }
  std::unique_ptr<void, free_deleter> x_, y_;
};

// A view of the arena for calls of n elements: slot(i) gives the i-th (x, y)
// pair, 64-byte aligned; slots() is 1 for calls small enough to stay in
// cache, else as many as the arena holds.
template <class T>
class slots {
 public:
  explicit slots(std::size_t n) : n_(n), stride_((n + 63) / 64 * 64) {
    if (n > arena<T>::elems) {
      std::fprintf(stderr, "smax_bench: n = %zu exceeds the arena\n", n);
      std::abort();
    }
    count_ = (2 * n * sizeof(T) >= rotate_min_bytes) ? arena<T>::elems / stride_ : 1;
  }
  std::size_t count() const { return count_; }
  const T* x(std::size_t i) const { return arena<T>::get().x() + (i % count_) * stride_; }
  T* y(std::size_t i) const { return arena<T>::get().y() + (i % count_) * stride_; }
  std::size_t n() const { return n_; }

 private:
  std::size_t n_, stride_, count_ = 1;
};

// The same logits scaled to N(0, 20^2) (float): their exponentials reach
// below FLT_MIN (entries 87-103 under the max), the subnormal band
// (bench_subnormal.cpp). wide_input(x) maps a pointer into the shared arena
// to the same place in this one, so rotation and slots work unchanged.
inline const float* wide_input(const float* x) {
  static const std::unique_ptr<void, free_deleter> wide = [] {
    auto p = touched(arena_bytes);
    float* w = static_cast<float*>(p.get());
    const float* src = arena<float>::get().x();
    for (std::size_t i = 0; i < arena<float>::elems; ++i) w[i] = src[i] * (20.0f / 3.0f);
    return p;
  }();
  return static_cast<const float*>(wide.get()) + (x - arena<float>::get().x());
}

// n elements of the shared input (the first slot), for kernels that take
// other arguments than (x, y, n) but want the same data.
template <class T>
inline const T* input(std::size_t n) {
  return slots<T>(n).x(0);
}

// -------------------------------------------------------------- roofline --

// Streaming kernels on the best ISA the CPU has (bench/roofline.cpp), on raw
// bytes (a multiple of 64): rw2 reads src, reduces it (max), reads it again
// and writes dst = src * f(max): the floor traffic of an exact out-of-cache
// softmax. copy reads src and writes dst. `stream` picks non-temporal stores.
namespace roofline {
void rw2(const void* src, void* dst, std::size_t bytes, bool stream);
void copy(const void* src, void* dst, std::size_t bytes, bool stream);
const char* isa();
// Whether the roofline uses non-temporal stores at this size: the store kind
// that measured faster on this machine (the same threshold smax uses).
bool streams(std::size_t bytes);
}  // namespace roofline

enum class roof_kind { rw2, copy };

// ----------------------------------------------------------------- timing --

// CPU time of this thread: robust against the descheduling that a shared
// machine causes (Google Benchmark's default clock is CPU time too).
inline double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Wall-clock time: the only honest clock for work spread over several
// threads (the calling thread's CPU time misses the workers' share and the
// time it waits for them).
inline double wall_seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

using clock_fn = double (*)();

// The executor for `threads` threads: nullptr (the calling thread) for 1,
// else one smax::thread_pool of that size, created on first use and kept
// for the whole run (creating threads per call would be timed).
inline smax::executor* pool(std::size_t threads) {
  if (threads <= 1) return nullptr;
  static std::mutex m;
  static std::map<std::size_t, std::unique_ptr<smax::thread_pool>> pools;
  std::lock_guard<std::mutex> lock(m);
  auto& p = pools[threads];
  if (!p) p.reset(new smax::thread_pool(threads));
  return p.get();
}

// One roofline call over `bytes`, cut into `threads` parts (multiples of 64
// bytes, the first ones equal) that run concurrently on pool(threads). The
// store kind is chosen from the whole call's size, as a kernel would.
inline void roofline_call(roof_kind kind, const void* src, void* dst, std::size_t bytes, std::size_t threads = 1) {
  const bool stream = roofline::streams(bytes);
  const auto part = [&](const void* s, void* d, std::size_t b) {
    if (kind == roof_kind::rw2)
      roofline::rw2(s, d, b, stream);
    else
      roofline::copy(s, d, b, stream);
  };
  if (threads <= 1) return part(src, dst, bytes);
  const std::size_t chunk = (bytes / threads) / 64 * 64;
  pool(threads)->run(threads, [&](std::size_t i) {
    const std::size_t off = i * chunk;
    const std::size_t len = i + 1 == threads ? bytes - off : chunk;
    if (len) part(static_cast<const char*>(src) + off, static_cast<char*>(dst) + off, len);
  });
}

// Seconds per call of the roofline over the same slots, timed for about
// `budget` seconds (at least four calls), reading the clock only every
// ~100 us (the thread CPU clock is a system call in a VM: ~1 us). `threads`
// and `clock` must match how the kernel it is paired with was run and timed.
template <class T>
double roofline_seconds(const slots<T>& s, std::size_t elems_per_call, roof_kind kind, double budget,
                        double guess_per_call, std::size_t threads = 1, clock_fn clock = thread_seconds) {
  const std::size_t bytes = elems_per_call * sizeof(T);
  const std::size_t batch = guess_per_call > 0 && guess_per_call < 25e-6
                                ? static_cast<std::size_t>(100e-6 / guess_per_call)
                                : std::size_t(4);
  std::size_t calls = 0, slot = 0;
  const double t0 = clock();
  double t = t0;
  do {
    for (std::size_t k = 0; k < batch; ++k, ++calls, ++slot) roofline_call(kind, s.x(slot), s.y(slot), bytes, threads);
    benchmark::ClobberMemory();
    t = clock();
  } while (t - t0 < budget);
  return (t - t0) / static_cast<double>(calls);
}

// --------------------------------------------------------------- kernels --

// Arrays of n elements read and written per element by the kernel's own
// algorithm when nothing stays in cache (e.g. two-pass softmax: {2, 1}).
struct mem_traffic {
  double reads = 2, writes = 1;
};

template <class T>
using check_fn = std::function<std::string(const T* x, const T* y, std::size_t n)>;

template <class T>
struct kernel {
  std::string name;  // "family/variant": the benchmark name's prefix
  mem_traffic traffic;
  std::function<void(const T* x, T* y, std::size_t n)> run;
  // optional, for register_batched: one call for the whole rows x cols
  // batch (row-major, contiguous); without it run() is called per row.
  std::function<void(const T* x, T* y, std::size_t rows, std::size_t cols)> run_batch;
  // for register_threaded: one call for the whole rows x cols matrix
  // (row-major, contiguous) on `threads` threads (1: the calling thread).
  std::function<void(const T* x, T* y, std::size_t rows, std::size_t cols, std::size_t threads)> run_threaded;
  check_fn<T> check;     // optional; run once per (name, n) before timing
  roof_kind roof = roof_kind::rw2; // what vs_roofline compares against
  std::string label = "smax";  // "smax", "peer" or "roofline" (report.py groups by it)
};

// Every entry finite; sums to 1 within tol (softmax-like kernels).
template <class T>
std::string sum_check(const T* /*x*/, const T* y, std::size_t n, double tol) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(y[i])) return "non-finite output at " + std::to_string(i);
    s += y[i];
  }
  if (std::fabs(s - 1.0) > tol) return "outputs sum to " + std::to_string(s);
  return {};
}

template <class T>
std::string finite_check(const T* /*x*/, const T* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(y[i])) return "non-finite output at " + std::to_string(i);
  return {};
}

// |y - ref| <= rtol * |ref| + atol elementwise, ref computed by `reference`.
template <class T>
check_fn<T> compare_check(std::function<void(const T*, T*, std::size_t)> reference, double rtol, double atol) {
  return [reference, rtol, atol](const T* x, const T* y, std::size_t n) -> std::string {
    std::vector<T> ref(n);
    reference(x, ref.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const double d = std::fabs(static_cast<double>(y[i]) - static_cast<double>(ref[i]));
      if (!(d <= rtol * std::fabs(static_cast<double>(ref[i])) + atol)) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "mismatch at %zu: got %.9g, reference %.9g", i, static_cast<double>(y[i]),
                      static_cast<double>(ref[i]));
        return buf;
      }
    }
    return {};
  };
}

// Verdicts of the output checks so far, by benchmark name ("" = passed).
inline std::map<std::string, std::string>& verdicts() {
  static std::map<std::string, std::string> v;
  return v;
}

// Runs the kernel and k.check once per benchmark name (Google Benchmark calls
// a benchmark function several times); false (benchmark skipped) on failure.
// run_once() computes rows x cols outputs at x, y (row-major); k.check then
// looks at every row.
template <class T, class Run>
bool checked_rows(benchmark::State& state, const kernel<T>& k, const std::string& name, const T* x, T* y,
                  std::size_t rows, std::size_t cols, Run&& run_once) {
  // Kernels without a check get the same untimed first calls: their own
  // lazy setup (bench_subnormal.cpp's softmax of the whole wide arena took
  // 2.6 s) then stays out of the timed loop and of Google Benchmark's
  // probe of the iteration count.
  auto it = verdicts().find(name);
  if (it == verdicts().end()) {
    run_once();
    std::string verdict;
    for (std::size_t r = 0; k.check && r < rows && verdict.empty(); ++r) {
      verdict = k.check(x + r * cols, y + r * cols, cols);
      if (!verdict.empty() && rows > 1) verdict = "row " + std::to_string(r) + ": " + verdict;
    }
    it = verdicts().emplace(name, verdict).first;
    // One more untimed call: on this VM the first call after the check was
    // 3-10x slower for the peers at 64M floats (300-700 ms instead of 60;
    // seen after compare_check, which allocates a 256 MiB reference), and
    // Google Benchmark sizes every repetition's iteration count from that
    // first probe (one slow call >= 5 x min_time ends the probe).
    if (verdict.empty()) run_once();
  }
  if (!it->second.empty()) {
    state.SkipWithError(("output check failed: " + it->second).c_str());
    return false;
  }
  return true;
}

template <class T>
bool checked(benchmark::State& state, const kernel<T>& k, const std::string& name, const T* x, T* y, std::size_t n) {
  return checked_rows(state, k, name, x, y, 1, n, [&] { k.run(x, y, n); });
}

// Sets the rate counters and, after the timed loop, times the roofline on
// the same slots for a quarter of the kernel's time, on as many threads and
// with the same clock as the kernel. Counters: vs_roofline (roofline time /
// kernel time) and roofline_items_per_second (the roofline's own rate, so
// that rooflines of different thread counts can be compared).
template <class T>
void finish(benchmark::State& state, const kernel<T>& k, const slots<T>& s, std::size_t elems_per_call,
            double kernel_seconds, std::size_t threads = 1, clock_fn clock = thread_seconds) {
  const double calls = static_cast<double>(state.iterations());
  const double elems = static_cast<double>(elems_per_call) * calls;
  state.SetItemsProcessed(static_cast<std::int64_t>(elems));
  state.SetBytesProcessed(
      static_cast<std::int64_t>(elems * sizeof(T) * (k.traffic.reads + k.traffic.writes)));
  if (calls <= 0 || kernel_seconds <= 0) return;
  const double per_call = kernel_seconds / calls;
  const double roof_per_call =
      roofline_seconds(s, elems_per_call, k.roof, 0.25 * kernel_seconds, per_call, threads, clock);
  state.counters["vs_roofline"] = roof_per_call / per_call;
  state.counters["roofline_items_per_second"] = static_cast<double>(elems_per_call) / roof_per_call;
}

// The body of one benchmark run of k on n elements (rows > 1: a batch of
// rows x n, k.run called per row).
template <class T>
void run_kernel(benchmark::State& state, const kernel<T>& k, const std::string& bench_name, std::size_t rows,
                std::size_t n) {
  const std::size_t total = rows * n;
  slots<T> s(total);
  if (!checked(state, k, bench_name, s.x(0), s.y(0), n)) return;
  std::size_t slot = 0;
  const double t0 = thread_seconds();
  for (auto _ : state) {
    const T* x = s.x(slot);
    T* y = s.y(slot);
    if (k.run_batch && rows > 1)
      k.run_batch(x, y, rows, n);
    else
      for (std::size_t r = 0; r < rows; ++r) k.run(x + r * n, y + r * n, n);
    benchmark::DoNotOptimize(y);
    benchmark::ClobberMemory();
    ++slot;
  }
  const double t1 = thread_seconds();
  state.SetLabel(k.label);
  finish(state, k, s, total, t1 - t0);
}

// Registers "<k.name>/<f32|f64>/<isa>/<n>" for each ISA compiled in.
template <class T>
void register_per_isa(const kernel<T>& k, const std::vector<std::size_t>& ns) {
  for (const std::string& isa : compiled_isas()) {
    const std::string name = k.name + "/" + type_name<T>() + "/" + isa;
    for (std::size_t n : ns) {
      const std::string full = name + "/" + std::to_string(n);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [k, isa, n, full](benchmark::State& state) {
                                     isa_scope scope(state, isa);
                                     if (scope.ok()) run_kernel(state, k, full, 1, n);
                                   })
          ->Arg(static_cast<std::int64_t>(n));
    }
  }
}

// Registers "<k.name>/<f32|f64>/<isa>" once (peers: isa names who picks the
// code, e.g. "native"), sizes as the argument.
template <class T>
void register_once(const kernel<T>& k, const std::string& isa, const std::vector<std::size_t>& ns) {
  const std::string name = k.name + "/" + type_name<T>() + "/" + isa;
  for (std::size_t n : ns) {
    const std::string full = name + "/" + std::to_string(n);
    benchmark::RegisterBenchmark(name.c_str(), [k, n, full](benchmark::State& state) { run_kernel(state, k, full, 1, n); })
        ->Arg(static_cast<std::int64_t>(n));
  }
}

// Batched rows x cols: "<k.name>/<type>/<isa>/<rows>/<cols>", k.run_batch if
// set, else k.run once per row (the output check looks at the first row).
// Rows of a few hundred KiB stay in L2 between a kernel's passes, so the
// minimal DRAM traffic is one read and one write: set k.traffic = {1, 1} and
// k.roof = roof_kind::copy for a softmax.
template <class T>
void register_batched(const kernel<T>& k, const std::string& isa, bool route_isa, std::size_t rows = batch_rows,
                      std::size_t cols = batch_cols) {
  const std::string name = k.name + "/" + type_name<T>() + "/" + isa;
  const std::string full = name + "/" + std::to_string(rows) + "/" + std::to_string(cols);
  benchmark::RegisterBenchmark(name.c_str(),
                               [k, isa, route_isa, rows, cols, full](benchmark::State& state) {
                                 if (route_isa) {
                                   isa_scope scope(state, isa);
                                   if (scope.ok()) run_kernel(state, k, full, rows, cols);
                                 } else {
                                   run_kernel(state, k, full, rows, cols);
                                 }
                               })
      ->Args({static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols)});
}

// The body of one multi-threaded run: k.run_threaded on the whole rows x
// cols matrix with `threads` threads, timed on the wall clock, checked first
// (every row, the same call as the timed one).
template <class T>
void run_threaded_kernel(benchmark::State& state, const kernel<T>& k, const std::string& bench_name,
                         std::size_t rows, std::size_t cols, std::size_t threads) {
  const std::size_t total = rows * cols;
  slots<T> s(total);
  if (!checked_rows(state, k, bench_name, s.x(0), s.y(0), rows, cols,
                    [&] { k.run_threaded(s.x(0), s.y(0), rows, cols, threads); }))
    return;
  std::size_t slot = 0;
  const double t0 = wall_seconds();
  for (auto _ : state) {
    T* y = s.y(slot);
    k.run_threaded(s.x(slot), y, rows, cols, threads);
    benchmark::DoNotOptimize(y);
    benchmark::ClobberMemory();
    ++slot;
  }
  const double t1 = wall_seconds();
  state.SetLabel(k.label);
  finish(state, k, s, total, t1 - t0, threads, wall_seconds);
}

// ------------------------------------------------------- 16-bit logits --

// The float arena's logits (N(0, 3^2)) rounded to H, at the same byte
// offsets: half_input<H>(x) maps a pointer into the float arena to the
// 16-bit copy of the logits that starts at the same byte. Wide: those
// logits scaled to N(0, 20^2) first, as wide_input's (bench_subnormal.cpp).
template <class H, bool Wide = false>
const H* half_input(const float* x) {
  static const std::unique_ptr<void, free_deleter> arena16 = [] {
    auto p = touched(arena_bytes);
    H* h = static_cast<H*>(p.get());
    const std::size_t n = arena_bytes / sizeof(H);
    constexpr std::size_t chunk = std::size_t(1) << 20;
    std::vector<float> f(chunk);
    for (std::size_t o = 0; o < n; o += chunk) {
      fill_logits(f.data(), chunk, 7 + o / chunk);
      if (Wide)
        for (float& v : f) v *= 20.0f / 3.0f;
      smax::dynamic::convert(f.data(), h + o, std::min(chunk, n - o));
    }
    return p;
  }();
  const std::size_t byte = static_cast<std::size_t>(reinterpret_cast<const char*>(x) -
                                                    reinterpret_cast<const char*>(arena<float>::get().x()));
  return reinterpret_cast<const H*>(static_cast<const char*>(arena16.get()) + byte);
}

template <class H>
inline const char* half_name() {
  return std::is_same<H, smax::bf16>::value ? "bf16" : "fp16";
}

// Every output finite, and (strict) the sum within the outputs' rounding:
// half an ulp of H each (2^-9 relative for bf16, and fp16's 2^-25 absolute
// below 2^-14, where a 64M row's outputs lie), doubled for slack. The peers
// are timed with strict = false (libtorch's and oneDNN's bf16 64M sums were
// 1.016 and 1.008 here: beyond that bound; docs/half.md).
template <class H>
std::string half_sum_check(const float* x, const float* y, std::size_t m, bool strict = true) {
  (void)x;
  const H* h = reinterpret_cast<const H*>(y);
  double s = 0, slack = 0;
  for (std::size_t i = 0; i < 2 * m; ++i) {
    const float v = static_cast<float>(h[i]);
    if (!std::isfinite(v)) return "non-finite output at " + std::to_string(i);
    s += v;
    slack += std::is_same<H, smax::fp16>::value ? (v < 0x1p-14f ? 0x1p-25 : v * 0x1p-12) : v * 0x1p-9;
  }
  if (strict && std::fabs(s - 1.0) > 2 * slack) return "outputs sum to " + std::to_string(s);
  return {};
}

// Registers "<k.name>/<bf16|fp16>/<isa>/<n>" for n 16-bit elements at 4K,
// 64K, 1M and 64M (or `sizes`): k runs on n/2 floats' slots (the same
// bytes; k.run gets n/2 and passes half_input<H>(x) on), its roofline is
// that of the same bytes, and items_per_second counts 16-bit elements.
template <class H>
void register_half_sizes(const kernel<float>& k, const std::string& isa, bool route_isa,
                         const std::vector<std::size_t>& sizes = {std::size_t(4096), std::size_t(65536),
                                                                  std::size_t(1) << 20, std::size_t(64) << 20}) {
  const std::string base = k.name + "/" + half_name<H>() + "/" + isa;
  for (std::size_t n : sizes) {
    const std::string full = base + "/" + std::to_string(n);
    benchmark::RegisterBenchmark(base.c_str(),
                                 [k, isa, route_isa, n, full](benchmark::State& state) {
                                   if (route_isa) {
                                     isa_scope scope(state, isa);
                                     if (!scope.ok()) return;
                                     run_kernel(state, k, full, 1, n / 2);
                                   } else {
                                     run_kernel(state, k, full, 1, n / 2);
                                   }
                                   state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
                                 })
        ->Arg(static_cast<std::int64_t>(n));
  }
}

struct shape {
  std::size_t rows, cols;
};

// The threaded shapes: all 64M floats (256 MiB, the arena), from many short
// rows (16384 x 1024) to one long row (1 x 64M, which smax splits into
// blocks across the threads).
inline const std::vector<shape>& threaded_shapes() {
  static const std::vector<shape> v = {{2048, 32768}, {16384, 1024}, {64, 1048576}, {1, 67108864}};
  return v;
}

// Registers "<k.name>/<type>/<isa>/<rows>/<cols>/threads:<t>/real_time" for
// every shape and thread count, wall-clock timed (see the header comment);
// route_isa: set smax::dynamic's ISA to `isa` for the run (smax kernels),
// else `isa` only names who picks the code (peers: "native").
template <class T>
void register_threaded(const kernel<T>& k, const std::string& isa, bool route_isa, const std::vector<shape>& shapes,
                       const std::vector<std::size_t>& thread_counts) {
  for (const shape& sh : shapes) {
    for (std::size_t t : thread_counts) {
      const std::string name = k.name + "/" + type_name<T>() + "/" + isa + "/" + std::to_string(sh.rows) + "/" +
                               std::to_string(sh.cols) + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [k, isa, route_isa, sh, t, name](benchmark::State& state) {
                                     if (route_isa) {
                                       isa_scope scope(state, isa);
                                       if (scope.ok()) run_threaded_kernel(state, k, name, sh.rows, sh.cols, t);
                                     } else {
                                       run_threaded_kernel(state, k, name, sh.rows, sh.cols, t);
                                     }
                                   })
          ->UseRealTime();
    }
  }
}

// A peer's 16-bit softmax, "<name>/<bf16|fp16>/native/<n>" at the sizes of
// register_half_sizes: run(x, y, n) on n 16-bit logits may throw when the
// peer has no kernel for H; the first call (the output check's) catches it,
// and the check then skips the entry before any timed call. Timed with the
// finite check only (see half_sum_check).
template <class H>
void register_half_peer(const std::string& name, std::function<void(const H*, H*, std::size_t)> run) {
  kernel<float> k;
  k.name = name;
  k.label = "peer";
  k.traffic = {3, 2};
  auto refused = std::make_shared<std::string>();
  k.run = [run, refused, name](const float* x, float* y, std::size_t m) {
    if (!refused->empty()) return;
    try {
      run(half_input<H>(x), reinterpret_cast<H*>(y), 2 * m);
    } catch (const std::exception& e) {
      *refused = name + ": " + std::string(e.what()).substr(0, 80);
    }
  };
  k.check = [refused](const float* x, const float* y, std::size_t m) -> std::string {
    if (!refused->empty()) return *refused;
    return half_sum_check<H>(x, y, m, false);
  };
  register_half_sizes<H>(k, "native", false);
}

// 16-bit rows: "<k.name>/<bf16|fp16>/<isa>/<rows>/<cols>/threads:<t>/real_time"
// with cols 16-bit elements per row; k.run_threaded gets the float slots'
// shape (rows, cols / 2: the same bytes) and passes half_input<H>(x) on.
template <class H>
void register_half_threaded(const kernel<float>& k, const std::string& isa, shape sh16,
                            const std::vector<std::size_t>& thread_counts) {
  for (std::size_t t : thread_counts) {
    const std::string name = k.name + "/" + half_name<H>() + "/" + isa + "/" + std::to_string(sh16.rows) + "/" +
                             std::to_string(sh16.cols) + "/threads:" + std::to_string(t);
    benchmark::RegisterBenchmark(name.c_str(),
                                 [k, isa, sh16, t, name](benchmark::State& state) {
                                   isa_scope scope(state, isa);
                                   if (!scope.ok()) return;
                                   run_threaded_kernel(state, k, name, sh16.rows, sh16.cols / 2, t);
                                   state.SetItemsProcessed(state.iterations() *
                                                           static_cast<std::int64_t>(sh16.rows * sh16.cols));
                                 })
        ->UseRealTime();
  }
}

// MultiMax's modulator with every term active (values of the scale the
// official code's trained parameters take: O(0.1) slopes, knees near 0).
inline smax::multimax_params multimax_params_with_every_term() {
  smax::multimax_params p;
  const double r[4] = {-0.5, 0.8, -1.5, 2.0}, t[4] = {0.3, -0.2, 0.05, 0.02};
  for (int i = 0; i < 4; ++i) p.ranges[i] = r[i], p.ts[i] = t[i];
  return p;
}

}  // namespace smax_bench

// Registers benchmarks at program start: SMAX_BENCH_REGISTER(tag) { ... }.
#define SMAX_BENCH_REGISTER(tag)                                                            \
  static void smax_bench_register_##tag();                                                 \
  [[maybe_unused]] static const bool smax_bench_registered_##tag =                          \
      (smax_bench_register_##tag(), true);                                                  \
  static void smax_bench_register_##tag()
