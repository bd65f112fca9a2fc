// ThreadSanitizer check (tools/run_tests.sh stage "tsan"): many threads
// calling smax at once, the thread pool reused for many jobs, and one long
// row split across threads. Built on the TU's own ISA (no runtime dispatch):
// what TSan checks here is smax's shared state, which is the same on every ISA.
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <smax/smax.hpp>

int main() {
  int failures = 0;
  const std::size_t rows = 64, cols = 1500;
  std::vector<float> x(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 101) * 0.05f - 2.0f;
  std::vector<float> ref(rows * cols);
  smax::softmax(smax::matrix_view<const float>(x.data(), rows, cols), smax::matrix_view<float>(ref.data(), rows, cols));

  // One pool, many jobs, from two threads at once (run() serializes them).
  smax::thread_pool pool(4);
  std::vector<std::thread> callers;
  std::vector<int> bad(2, 0);
  for (int c = 0; c < 2; ++c)
    callers.emplace_back([&, c] {
      std::vector<float> y(rows * cols);
      for (int rep = 0; rep < 30; ++rep) {
        smax::softmax(smax::matrix_view<const float>(x.data(), rows, cols), smax::matrix_view<float>(y.data(), rows, cols),
                      smax::algorithm::automatic, &pool);
        bad[c] += std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) != 0;
      }
    });
  for (auto& t : callers) t.join();
  failures += bad[0] + bad[1];

  // Plain calls from 8 threads at once, against a single-thread result.
  std::vector<float> row_ref(cols), grad_ref(cols);
  smax::softmax(x.data(), row_ref.data(), cols, smax::algorithm::online);
  smax::softmax_backward(row_ref.data(), x.data(), grad_ref.data(), cols);
  std::vector<std::thread> threads;
  std::vector<int> wrong(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      std::vector<float> y(cols), d(cols);
      for (int rep = 0; rep < 20; ++rep) {
        smax::softmax(x.data(), y.data(), cols, smax::algorithm::online);
        smax::softmax_backward(y.data(), x.data(), d.data(), cols);
        wrong[t] += std::memcmp(y.data(), row_ref.data(), cols * sizeof(float)) != 0;
        wrong[t] += std::memcmp(d.data(), grad_ref.data(), cols * sizeof(float)) != 0;
      }
    });
  for (auto& t : threads) t.join();
  for (int w : wrong) failures += w;

  // A long row split into blocks across the pool.
  std::vector<float> big(std::size_t(1) << 19), a(big.size()), b(big.size());
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 1001) * 0.01f;
  smax::softmax(smax::matrix_view<const float>(big.data(), 1, big.size()), smax::matrix_view<float>(a.data(), 1, big.size()));
  for (int rep = 0; rep < 5; ++rep) {
    smax::softmax(smax::matrix_view<const float>(big.data(), 1, big.size()),
                  smax::matrix_view<float>(b.data(), 1, big.size()), smax::algorithm::automatic, &pool);
    failures += std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0;
  }
  std::printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
  return failures ? 1 : 0;
}
