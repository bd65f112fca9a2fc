// The memory roofline of smax_bench: streaming kernels with the least work a
// softmax-shaped traffic pattern can have, on the widest vectors the CPU has.
//
//   rw2:  pass 1 reads src and reduces it (max), pass 2 reads src again and
//         writes dst = src * f(max): "read twice, write once", the traffic
//         floor of an exact softmax of a vector larger than the cache.
//   copy: reads src, writes dst (the floor of a batch of cache-sized rows).
//
// Both work on raw bytes (a multiple of 64, 64-byte aligned): the arrays of
// doubles are timed as twice as many floats, which moves the same bytes.
// They are compiled here with GCC/Clang target attributes (not the dispatch
// helper) because they are benchmark plumbing, not library code.
#include <immintrin.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <smax/detail/loops.hpp>

#include "common.hpp"

namespace smax_bench {
namespace roofline {
namespace {

#if defined(__x86_64__) || defined(_M_X64)

// The scale pass 2 applies: depends on the whole of pass 1, so pass 1 cannot
// be skipped or fused away.
inline float scale_of(float m) { return 1.0f / (2.0f + (m > 0 ? m : -m)); }

__attribute__((target("avx512f"))) void rw2_avx512(const float* x, float* y, std::size_t n, bool stream) {
  __m512 m0 = _mm512_set1_ps(-1e30f), m1 = m0, m2 = m0, m3 = m0;
  for (std::size_t i = 0; i < n; i += 64) {
    m0 = _mm512_max_ps(m0, _mm512_load_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_load_ps(x + i + 16));
    m2 = _mm512_max_ps(m2, _mm512_load_ps(x + i + 32));
    m3 = _mm512_max_ps(m3, _mm512_load_ps(x + i + 48));
  }
  // Lanes through memory: _mm512_reduce_max_ps trips g++ 12's false
  // -Wuninitialized inside avx512fintrin.h.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
  float m = lanes[0];
  for (float v : lanes) m = v > m ? v : m;
  const __m512 f = _mm512_set1_ps(scale_of(m));
  if (stream) {
    for (std::size_t i = 0; i < n; i += 32) {
      _mm512_stream_ps(y + i, _mm512_mul_ps(_mm512_load_ps(x + i), f));
      _mm512_stream_ps(y + i + 16, _mm512_mul_ps(_mm512_load_ps(x + i + 16), f));
    }
    _mm_sfence();
  } else {
    for (std::size_t i = 0; i < n; i += 32) {
      _mm512_store_ps(y + i, _mm512_mul_ps(_mm512_load_ps(x + i), f));
      _mm512_store_ps(y + i + 16, _mm512_mul_ps(_mm512_load_ps(x + i + 16), f));
    }
  }
}

__attribute__((target("avx512f"))) void copy_avx512(const float* x, float* y, std::size_t n, bool stream) {
  if (stream) {
    for (std::size_t i = 0; i < n; i += 32) {
      _mm512_stream_ps(y + i, _mm512_load_ps(x + i));
      _mm512_stream_ps(y + i + 16, _mm512_load_ps(x + i + 16));
    }
    _mm_sfence();
  } else {
    for (std::size_t i = 0; i < n; i += 32) {
      _mm512_store_ps(y + i, _mm512_load_ps(x + i));
      _mm512_store_ps(y + i + 16, _mm512_load_ps(x + i + 16));
    }
  }
}

__attribute__((target("avx2"))) float hmax256(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

__attribute__((target("avx2"))) void rw2_avx2(const float* x, float* y, std::size_t n, bool stream) {
  __m256 m0 = _mm256_set1_ps(-1e30f), m1 = m0, m2 = m0, m3 = m0;
  for (std::size_t i = 0; i < n; i += 32) {
    m0 = _mm256_max_ps(m0, _mm256_load_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_load_ps(x + i + 8));
    m2 = _mm256_max_ps(m2, _mm256_load_ps(x + i + 16));
    m3 = _mm256_max_ps(m3, _mm256_load_ps(x + i + 24));
  }
  const __m256 f = _mm256_set1_ps(scale_of(hmax256(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)))));
  if (stream) {
    for (std::size_t i = 0; i < n; i += 16) {
      _mm256_stream_ps(y + i, _mm256_mul_ps(_mm256_load_ps(x + i), f));
      _mm256_stream_ps(y + i + 8, _mm256_mul_ps(_mm256_load_ps(x + i + 8), f));
    }
    _mm_sfence();
  } else {
    for (std::size_t i = 0; i < n; i += 16) {
      _mm256_store_ps(y + i, _mm256_mul_ps(_mm256_load_ps(x + i), f));
      _mm256_store_ps(y + i + 8, _mm256_mul_ps(_mm256_load_ps(x + i + 8), f));
    }
  }
}

__attribute__((target("avx2"))) void copy_avx2(const float* x, float* y, std::size_t n, bool stream) {
  if (stream) {
    for (std::size_t i = 0; i < n; i += 16) {
      _mm256_stream_ps(y + i, _mm256_load_ps(x + i));
      _mm256_stream_ps(y + i + 8, _mm256_load_ps(x + i + 8));
    }
    _mm_sfence();
  } else {
    for (std::size_t i = 0; i < n; i += 16) {
      _mm256_store_ps(y + i, _mm256_load_ps(x + i));
      _mm256_store_ps(y + i + 8, _mm256_load_ps(x + i + 8));
    }
  }
}

void rw2_sse2(const float* x, float* y, std::size_t n, bool stream) {
  __m128 m0 = _mm_set1_ps(-1e30f), m1 = m0, m2 = m0, m3 = m0;
  for (std::size_t i = 0; i < n; i += 16) {
    m0 = _mm_max_ps(m0, _mm_load_ps(x + i));
    m1 = _mm_max_ps(m1, _mm_load_ps(x + i + 4));
    m2 = _mm_max_ps(m2, _mm_load_ps(x + i + 8));
    m3 = _mm_max_ps(m3, _mm_load_ps(x + i + 12));
  }
  __m128 m = _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  const __m128 f = _mm_set1_ps(scale_of(_mm_cvtss_f32(m)));
  for (std::size_t i = 0; i < n; i += 8) {
    const __m128 a = _mm_mul_ps(_mm_load_ps(x + i), f), b = _mm_mul_ps(_mm_load_ps(x + i + 4), f);
    if (stream) {
      _mm_stream_ps(y + i, a);
      _mm_stream_ps(y + i + 4, b);
    } else {
      _mm_store_ps(y + i, a);
      _mm_store_ps(y + i + 4, b);
    }
  }
  if (stream) _mm_sfence();
}

void copy_sse2(const float* x, float* y, std::size_t n, bool stream) {
  for (std::size_t i = 0; i < n; i += 8) {
    const __m128 a = _mm_load_ps(x + i), b = _mm_load_ps(x + i + 4);
    if (stream) {
      _mm_stream_ps(y + i, a);
      _mm_stream_ps(y + i + 4, b);
    } else {
      _mm_store_ps(y + i, a);
      _mm_store_ps(y + i + 4, b);
    }
  }
  if (stream) _mm_sfence();
}

using kernel_fn = void (*)(const float*, float*, std::size_t, bool);
struct impl {
  const char* isa;
  kernel_fn rw2, copy;
};

const impl& best() {
  static const impl chosen = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return impl{"avx512", rw2_avx512, copy_avx512};
    if (__builtin_cpu_supports("avx2")) return impl{"avx2", rw2_avx2, copy_avx2};
    return impl{"sse2", rw2_sse2, copy_sse2};
  }();
  return chosen;
}

#else  // portable fallback (aarch64 etc.): the compiler vectorizes these loops

void rw2_plain(const float* x, float* y, std::size_t n, bool) {
  float m = -1e30f;
  for (std::size_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  const float f = 1.0f / (2.0f + (m > 0 ? m : -m));
  for (std::size_t i = 0; i < n; ++i) y[i] = x[i] * f;
}
void copy_plain(const float* x, float* y, std::size_t n, bool) {
  for (std::size_t i = 0; i < n; ++i) y[i] = x[i];
}
using kernel_fn = void (*)(const float*, float*, std::size_t, bool);
struct impl {
  const char* isa;
  kernel_fn rw2, copy;
};
const impl& best() {
  static const impl chosen{"scalar", rw2_plain, copy_plain};
  return chosen;
}

#endif

void check_layout(const void* src, void* dst, std::size_t bytes) {
  if (bytes % 64 != 0 || reinterpret_cast<std::uintptr_t>(src) % 64 != 0 ||
      reinterpret_cast<std::uintptr_t>(dst) % 64 != 0) {
    std::fprintf(stderr, "smax_bench roofline: needs 64-byte aligned buffers and sizes\n");
    std::abort();
  }
}

}  // namespace

void rw2(const void* src, void* dst, std::size_t bytes, bool stream) {
  check_layout(src, dst, bytes);
  best().rw2(static_cast<const float*>(src), static_cast<float*>(dst), bytes / sizeof(float), stream);
}

void copy(const void* src, void* dst, std::size_t bytes, bool stream) {
  check_layout(src, dst, bytes);
  best().copy(static_cast<const float*>(src), static_cast<float*>(dst), bytes / sizeof(float), stream);
}

const char* isa() { return best().isa; }

bool streams(std::size_t bytes) { return bytes >= smax::detail::stream_min_bytes; }

}  // namespace roofline

// The roofline benchmarks themselves: "roofline/<rw2|copy>[_store|_stream]/f32/<isa>/<n>",
// with traffic 2R+1W (rw2) or 1R+1W (copy). The plain names use the store
// kind smax uses at that size; _store and _stream force one (they show where
// the threshold belongs).
SMAX_BENCH_REGISTER(roofline) {
  for (int kind = 0; kind < 2; ++kind) {
    for (int mode = 0; mode < 3; ++mode) {
      kernel<float> k;
      const char* base = kind == 0 ? "roofline/rw2" : "roofline/copy";
      const char* suffix = mode == 0 ? "" : mode == 1 ? "_store" : "_stream";
      k.name = std::string(base) + suffix;
      k.traffic = kind == 0 ? mem_traffic{2, 1} : mem_traffic{1, 1};
      k.roof = kind == 0 ? roof_kind::rw2 : roof_kind::copy;
      k.label = "roofline";
      k.run = [kind, mode](const float* x, float* y, std::size_t n) {
        const std::size_t bytes = n * sizeof(float);
        const bool stream = mode == 0 ? roofline::streams(bytes) : mode == 2;
        if (kind == 0)
          roofline::rw2(x, y, bytes, stream);
        else
          roofline::copy(x, y, bytes, stream);
      };
      register_once(k, roofline::isa(), sizes<float>());
    }
  }
  // The same at 64M elements on 1 and 2 threads (wall clock), the part each
  // thread moves being a contiguous half: "roofline/<rw2|copy>/f32/<isa>/1/
  // 67108864/threads:<t>/real_time". Their roofline_items_per_second shows
  // how much a second core adds to the memory bandwidth.
  for (int kind = 0; kind < 2; ++kind) {
    kernel<float> k;
    k.name = kind == 0 ? "roofline/rw2" : "roofline/copy";
    k.traffic = kind == 0 ? mem_traffic{2, 1} : mem_traffic{1, 1};
    k.roof = kind == 0 ? roof_kind::rw2 : roof_kind::copy;
    k.label = "roofline";
    const roof_kind rk = k.roof;
    k.run_threaded = [rk](const float* x, float* y, std::size_t rows, std::size_t cols, std::size_t t) {
      roofline_call(rk, x, y, rows * cols * sizeof(float), t);
    };
    register_threaded(k, roofline::isa(), false, {{1, std::size_t(64) << 20}}, {1, 2});
  }
}

}  // namespace smax_bench
