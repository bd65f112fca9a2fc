/* The C API from C (C99): every function, f32, f64, bf16 and f16, single and batched,
 * on every ISA the CPU has, compared bit for bit with the C++ calls
 * (the file written by c_api_reference, argv[1]); then the error codes.
 * CTest builds it against smax::smax_c; tests/c_api/pkg_config.cmake builds
 * it with `cc $(pkg-config --cflags --libs smax)` against an install prefix. */
#include <smax/smax.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs.h"

static int failures = 0;
static FILE* expected = NULL;
static const char* isa_now = "";

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: [%s] failed: %s\n", __FILE__, __LINE__, isa_now, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

/* Compares `bytes` of output with the reference's next record. */
static void same_bits(const char* what, const void* out, size_t bytes) {
  unsigned char buf[CASE_ROWS * CASE_LD * 8];
  if (bytes > sizeof buf || fread(buf, 1, bytes, expected) != bytes) {
    fprintf(stderr, "[%s] %s: the reference file ends early\n", isa_now, what);
    ++failures;
    return;
  }
  if (memcmp(buf, out, bytes) != 0) {
    fprintf(stderr, "[%s] %s: differs from the C++ call\n", isa_now, what);
    ++failures;
  }
}

#define OK(call) CHECK((call) == SMAX_OK)

/* Same order as c_api_reference.cpp. Each case writes y (or dx) and
 * compares it; batched outputs are compared over the whole strided block
 * (the gaps between rows must be untouched: they hold 0.5). */
#define RUN_CASES(T, sfx, FILL, HALF)                                                                        \
  static void run_##sfx(void) {                                                                    \
    static T x[CASE_N], p[CASE_N], d[CASE_N], y[CASE_N], xin[CASE_N];                              \
    static T bx[CASE_ROWS * CASE_LD], bp[CASE_ROWS * CASE_LD], bd[CASE_ROWS * CASE_LD],            \
        by[CASE_ROWS * CASE_LD];                                                                   \
    const size_t n = CASE_N, r = CASE_ROWS, c = CASE_COLS, ld = CASE_LD, bn = CASE_ROWS * CASE_LD; \
    const T half_ = HALF;                                                                          \
    int a;                                                                                         \
    FILL(T, x, p, d, n, 1);                                                                        \
    FILL(T, bx, bp, bd, bn, 2);                                                                    \
    for (a = 0; a <= 4; ++a) {                                                                     \
      OK(smax_softmax_##sfx(x, y, n, (smax_algorithm)a));                                          \
      same_bits("softmax_" #sfx, y, sizeof y);                                                     \
    }                                                                                              \
    memcpy(xin, x, sizeof x); /* in place: the same bits */                                        \
    OK(smax_softmax_##sfx(xin, xin, n, SMAX_AUTOMATIC));                                           \
    OK(smax_softmax_##sfx(x, y, n, SMAX_AUTOMATIC));                                               \
    CHECK(memcmp(xin, y, sizeof y) == 0);                                                          \
    OK(smax_log_softmax_##sfx(x, y, n)); same_bits("log_softmax_" #sfx, y, sizeof y);              \
    OK(smax_sparsemax_##sfx(x, y, n)); same_bits("sparsemax_" #sfx, y, sizeof y);                  \
    OK(smax_entmax15_##sfx(x, y, n)); same_bits("entmax15_" #sfx, y, sizeof y);                    \
    OK(smax_entmax_bisect_##sfx(x, y, n, 1.25, 40)); same_bits("entmax_bisect_" #sfx, y, sizeof y); \
    OK(smax_stablemax_##sfx(x, y, n)); same_bits("stablemax_" #sfx, y, sizeof y);                  \
    OK(smax_log_stablemax_##sfx(x, y, n)); same_bits("log_stablemax_" #sfx, y, sizeof y);          \
    OK(smax_softpick_##sfx(x, y, n, 1e-6)); same_bits("softpick_" #sfx, y, sizeof y);              \
    OK(smax_ssmax_##sfx(x, y, n, 0.4, 0.1)); same_bits("ssmax_" #sfx, y, sizeof y);                \
    OK(smax_gumbel_noise_##sfx(y, n, 42, 7)); same_bits("gumbel_noise_" #sfx, y, sizeof y);        \
    OK(smax_gumbel_softmax_##sfx(x, y, n, 0.7, 9, 0)); same_bits("gumbel_softmax_" #sfx, y, sizeof y); \
    OK(smax_gumbel_softmax_##sfx(x, y, n, 0.7, 9, 1)); same_bits("gumbel_softmax_hard_" #sfx, y, sizeof y); \
    OK(smax_softmax_backward_##sfx(p, d, y, n)); same_bits("softmax_backward_" #sfx, y, sizeof y); \
    OK(smax_log_softmax_backward_##sfx(p, d, y, n));                                               \
    same_bits("log_softmax_backward_" #sfx, y, sizeof y);                                          \
    OK(smax_sparsemax_backward_##sfx(p, d, y, n)); same_bits("sparsemax_backward_" #sfx, y, sizeof y); \
    OK(smax_entmax_backward_##sfx(p, d, y, n, 1.5)); same_bits("entmax_backward_" #sfx, y, sizeof y); \
    OK(smax_stablemax_backward_##sfx(x, d, y, n)); same_bits("stablemax_backward_" #sfx, y, sizeof y); \
    OK(smax_softpick_backward_##sfx(x, p, d, y, n, 1e-6));                                         \
    same_bits("softpick_backward_" #sfx, y, sizeof y);                                             \
                                                                                                   \
    /* batched, threads = 2 (the caller's pool); the reference runs on one thread */               \
    for (a = 0; a <= 4; ++a) {                                                                     \
      BATCH_RESET(by, bn);                                                                         \
      OK(smax_softmax_batched_##sfx(bx, ld, by, ld, r, c, (smax_algorithm)a, 2));                  \
      same_bits("softmax_batched_" #sfx, by, sizeof by);                                           \
    }                                                                                              \
    BATCH(log_softmax, smax_log_softmax_batched_##sfx(bx, ld, by, ld, r, c, 2));                   \
    BATCH(sparsemax, smax_sparsemax_batched_##sfx(bx, ld, by, ld, r, c, 2));                       \
    BATCH(entmax15, smax_entmax15_batched_##sfx(bx, ld, by, ld, r, c, 2));                         \
    BATCH(entmax_bisect, smax_entmax_bisect_batched_##sfx(bx, ld, by, ld, r, c, 1.25, 40, 2));     \
    BATCH(stablemax, smax_stablemax_batched_##sfx(bx, ld, by, ld, r, c, 2));                       \
    BATCH(log_stablemax, smax_log_stablemax_batched_##sfx(bx, ld, by, ld, r, c, 2));               \
    BATCH(softpick, smax_softpick_batched_##sfx(bx, ld, by, ld, r, c, 1e-6, 2));                   \
    BATCH(ssmax, smax_ssmax_batched_##sfx(bx, ld, by, ld, r, c, 0.4, 0.1, 2));                     \
    BATCH(gumbel_softmax, smax_gumbel_softmax_batched_##sfx(bx, ld, by, ld, r, c, 0.7, 9, 0, 2));  \
    BATCH(gumbel_softmax_hard, smax_gumbel_softmax_batched_##sfx(bx, ld, by, ld, r, c, 0.7, 9, 1, 2)); \
    BATCH(softmax_backward, smax_softmax_backward_batched_##sfx(bp, ld, bd, ld, by, ld, r, c, 2)); \
    BATCH(log_softmax_backward, smax_log_softmax_backward_batched_##sfx(bp, ld, bd, ld, by, ld, r, c, 2)); \
    BATCH(sparsemax_backward, smax_sparsemax_backward_batched_##sfx(bp, ld, bd, ld, by, ld, r, c, 2)); \
    BATCH(entmax_backward, smax_entmax_backward_batched_##sfx(bp, ld, bd, ld, by, ld, r, c, 1.5, 2)); \
    BATCH(stablemax_backward, smax_stablemax_backward_batched_##sfx(bx, ld, bd, ld, by, ld, r, c, 2)); \
    BATCH(softpick_backward,                                                                       \
          smax_softpick_backward_batched_##sfx(bx, ld, bp, ld, bd, ld, by, ld, r, c, 1e-6, 2));    \
  }
#define BATCH_RESET(b, len)                              \
  do {                                                   \
    size_t i_;                                           \
    for (i_ = 0; i_ < (len); ++i_) (b)[i_] = half_;      \
  } while (0)
#define BATCH(name, call)                                \
  do {                                                   \
    BATCH_RESET(by, bn);                                 \
    OK(call);                                            \
    same_bits(#name "_batched", by, sizeof by);          \
  } while (0)

/* 16-bit inputs: the float inputs rounded by the library's conversion. */
static void fill16(uint16_t* x, uint16_t* p, uint16_t* d, size_t len, uint64_t seed,
                   smax_status (*to16)(const float*, uint16_t*, size_t)) {
  static float fx[CASE_ROWS * CASE_LD], fp[CASE_ROWS * CASE_LD], fd[CASE_ROWS * CASE_LD];
  CASE_FILL(float, fx, fp, fd, len, seed);
  OK(to16(fx, x, len));
  OK(to16(fp, p, len));
  OK(to16(fd, d, len));
}
#define FILL_BF16(T, x, p, d, len, seed) fill16(x, p, d, len, seed, smax_convert_f32_to_bf16)
#define FILL_F16(T, x, p, d, len, seed) fill16(x, p, d, len, seed, smax_convert_f32_to_f16)

RUN_CASES(float, f32, CASE_FILL, 0.5f)
RUN_CASES(double, f64, CASE_FILL, 0.5)
RUN_CASES(smax_bf16, bf16, FILL_BF16, 0x3F00) /* 0.5 */
RUN_CASES(smax_f16, f16, FILL_F16, 0x3800)    /* 0.5 */

/* Bad arguments: an error code, a message naming the parameter, nothing written. */
static void errors(void) {
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
  int i, untouched = 1;
  for (i = 0; i < 8; ++i) y[i] = -7.0f;
  CHECK(smax_entmax_bisect_f32(x, y, 8, 0.5f, 50) == SMAX_EINVAL);
  CHECK(strstr(smax_last_error(), "alpha") != NULL);
  CHECK(smax_softpick_f32(x, y, 8, -1.0f) == SMAX_EINVAL);
  CHECK(strstr(smax_last_error(), "eps") != NULL);
  CHECK(smax_gumbel_softmax_f32(x, y, 8, 0.0f, 1, 0) == SMAX_EINVAL);
  CHECK(strstr(smax_last_error(), "tau") != NULL);
  CHECK(smax_softmax_f32(x, y, 8, (smax_algorithm)99) == SMAX_EINVAL);
  CHECK(strstr(smax_last_error(), "smax_algorithm") != NULL);
  CHECK(smax_softmax_f32(NULL, y, 8, SMAX_AUTOMATIC) == SMAX_EINVAL);
  CHECK(strstr(smax_last_error(), "x is NULL") != NULL);
  CHECK(smax_entmax_backward_f64(NULL, NULL, NULL, 3, 0.5) == SMAX_EINVAL);
  CHECK(smax_softmax_batched_f32(x, 2, y, 4, 2, 4, SMAX_AUTOMATIC, 1) == SMAX_EINVAL); /* stride < cols */
  CHECK(strstr(smax_last_error(), "stride") != NULL);
  CHECK(smax_softmax_batched_f32(x, 4, y, 4, 2, 4, (smax_algorithm)-1, 1) == SMAX_EINVAL);
  CHECK(smax_entmax_bisect_batched_f32(x, 4, y, 4, 2, 4, 1.5f, -1, 2) == SMAX_EINVAL);
  CHECK(strstr(smax_last_error(), "n_iter") != NULL);
  for (i = 0; i < 8; ++i) untouched &= y[i] == -7.0f;
  CHECK(untouched);
  /* n = 0 and empty matrices accept NULL */
  CHECK(smax_softmax_f32(NULL, NULL, 0, SMAX_AUTOMATIC) == SMAX_OK);
  CHECK(smax_softmax_batched_f64(NULL, 0, NULL, 0, 0, 5, SMAX_AUTOMATIC, 3) == SMAX_OK);
  CHECK(smax_set_isa("no-such-isa") == SMAX_EINVAL);
  CHECK(strstr(smax_last_error(), "no-such-isa") != NULL);
  /* threads = 0: one per hardware thread, same bits as 1 */
  {
    float bx[64], b1[64], b0[64];
    for (i = 0; i < 64; ++i) bx[i] = (float)(i % 11) - 3.0f;
    OK(smax_softmax_batched_f32(bx, 0, b1, 0, 8, 8, SMAX_AUTOMATIC, 1));
    OK(smax_softmax_batched_f32(bx, 0, b0, 0, 8, 8, SMAX_AUTOMATIC, 0));
    CHECK(memcmp(b0, b1, sizeof b0) == 0);
  }
  CHECK(smax_gumbel_row_seed(5, 0) != smax_gumbel_row_seed(5, 1));
}

/* bf16 / f16: self-checked (no reference records): the 16-bit softmax is
 * within one 16-bit ulp of the float softmax of the 16-bit inputs,
 * the _to_f32 form within 1e-6 of it; null arrays are SMAX_EINVAL. */
static float absf(float v) { return v < 0 ? -v : v; }
static void half16(void) {
  enum { N = 37 };
  float x[N], back[N], ref[N], yf[N];
  uint16_t h[N], yh[N];
  int kind, i;
  for (i = 0; i < N; ++i) x[i] = (float)((i * 7) % 23) * 0.37f - 4.0f;
  for (kind = 0; kind < 2; ++kind) {
    const float ulp = kind ? 1.0f / 2048 : 1.0f / 256; /* relative, f16 and bf16 */
    OK(kind ? smax_convert_f32_to_f16(x, h, N) : smax_convert_f32_to_bf16(x, h, N));
    OK(kind ? smax_convert_f16_to_f32(h, back, N) : smax_convert_bf16_to_f32(h, back, N));
    for (i = 0; i < N; ++i) CHECK(absf(back[i] - x[i]) <= absf(x[i]) * ulp);
    OK(smax_softmax_f32(back, ref, N, SMAX_AUTOMATIC));
    OK(kind ? smax_softmax_f16(h, yh, N, SMAX_AUTOMATIC) : smax_softmax_bf16(h, yh, N, SMAX_AUTOMATIC));
    OK(kind ? smax_convert_f16_to_f32(yh, back, N) : smax_convert_bf16_to_f32(yh, back, N));
    for (i = 0; i < N; ++i) CHECK(absf(back[i] - ref[i]) <= ref[i] * ulp);
    OK(kind ? smax_softmax_f16_to_f32(h, yf, N, SMAX_TWO_PASS) : smax_softmax_bf16_to_f32(h, yf, N, SMAX_TWO_PASS));
    for (i = 0; i < N; ++i) CHECK(absf(yf[i] - ref[i]) <= ref[i] * 1e-6f);
    OK(kind ? smax_log_softmax_f16(h, yh, N) : smax_log_softmax_bf16(h, yh, N));
    OK(kind ? smax_softmax_batched_f16(h, N, yh, N, 1, N, SMAX_AUTOMATIC, 2)
            : smax_softmax_batched_bf16(h, N, yh, N, 1, N, SMAX_AUTOMATIC, 2));
    OK(kind ? smax_convert_f16_to_f32(yh, back, N) : smax_convert_bf16_to_f32(yh, back, N));
    for (i = 0; i < N; ++i) CHECK(absf(back[i] - ref[i]) <= ref[i] * ulp);
    OK(kind ? smax_softmax_backward_f16(yh, h, h, N) : smax_softmax_backward_bf16(yh, h, h, N));
    CHECK((kind ? smax_softmax_f16(NULL, yh, N, SMAX_AUTOMATIC) : smax_softmax_bf16(NULL, yh, N, SMAX_AUTOMATIC)) ==
          SMAX_EINVAL);
    CHECK((kind ? smax_convert_f16_to_f32(h, NULL, N) : smax_convert_bf16_to_f32(h, NULL, N)) == SMAX_EINVAL);
  }
}

int main(int argc, char** argv) {
  const char* isas[8];
  size_t count, k;
  if (argc < 2 || !(expected = fopen(argv[1], "rb"))) {
    fprintf(stderr, "usage: %s <reference file written by c_api_reference>\n", argv[0]);
    return 2;
  }
  CHECK(strcmp(smax_version(), SMAX_EXPECT_VERSION) == 0);
  count = smax_available_isas(isas, 8);
  CHECK(count >= 1 && count <= 8);
  for (k = 0; k < count; ++k) {
    isa_now = isas[k];
    CHECK(smax_set_isa(isas[k]) == SMAX_OK);
    CHECK(strcmp(smax_active_isa(), isas[k]) == 0);
    run_f32();
    run_f64();
    run_bf16();
    run_f16();
    half16();
  }
  {
    char extra;
    CHECK(fread(&extra, 1, 1, expected) == 0); /* the reference has no more records */
  }
  fclose(expected);
  isa_now = "errors";
  errors();
  CHECK(smax_set_isa(NULL) == SMAX_OK);
  printf("C API: %zu ISAs (%s first), %s\n", count, count ? isas[0] : "-", failures ? "FAILED" : "all bits equal to C++, errors ok");
  return failures ? 1 : 0;
}
