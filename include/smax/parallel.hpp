// smax — where batched work runs: a small executor interface, the built-in
// thread pool, and adaptors for a caller's own parallel-for.
//
// smax never starts threads on its own: the single-vector functions and the
// batched ones called without an executor run on the calling thread. Pass an
// executor to spread rows (or blocks of one long row) across threads. The
// results do not depend on the executor or its thread count: work is cut
// into pieces whose boundaries depend only on the shape, and partial results
// are combined in a fixed order (see batched.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace smax {

// Runs task(i) for every i in [0, count), possibly concurrently, and returns
// when all have finished. Tasks never throw; they touch disjoint output.
class executor {
 public:
  virtual ~executor() = default;
  virtual void run(std::size_t count, const std::function<void(std::size_t)>& task) = 0;
  // How many tasks may run at once (a hint for how finely to cut the work).
  virtual std::size_t concurrency() const noexcept = 0;
};

// Runs every task on the calling thread, in order.
class sequential_executor final : public executor {
 public:
  void run(std::size_t count, const std::function<void(std::size_t)>& task) override {
    for (std::size_t i = 0; i < count; ++i) task(i);
  }
  std::size_t concurrency() const noexcept override { return 1; }
};

// Adapts any parallel-for: f(count, task) must call task(i) once for each i
// in [0, count) and return when all calls have returned. For example, OpenMP:
//   smax::function_executor omp([](std::size_t n, const std::function<void(std::size_t)>& t) {
//     #pragma omp parallel for
//     for (long i = 0; i < (long)n; ++i) t(i);
//   }, omp_get_max_threads());
class function_executor final : public executor {
 public:
  using parallel_for = std::function<void(std::size_t, const std::function<void(std::size_t)>&)>;
  function_executor(parallel_for f, std::size_t concurrency) : f_(std::move(f)), concurrency_(concurrency ? concurrency : 1) {}
  void run(std::size_t count, const std::function<void(std::size_t)>& task) override { f_(count, task); }
  std::size_t concurrency() const noexcept override { return concurrency_; }

 private:
  parallel_for f_;
  std::size_t concurrency_;
};

// A fixed set of worker threads; the calling thread works too, so
// thread_pool(2) uses the caller plus one worker. Tasks are handed out one
// index at a time from a shared counter. One run() at a time per pool
// (concurrent run() calls on the same pool are serialized).
class thread_pool final : public executor {
 public:
  explicit thread_pool(std::size_t threads = std::thread::hardware_concurrency()) {
    const std::size_t workers = threads > 1 ? threads - 1 : 0;
    workers_.reserve(workers);
    for (std::size_t i = 0; i < workers; ++i) workers_.emplace_back([this] { work_loop(); });
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  std::size_t concurrency() const noexcept override { return workers_.size() + 1; }

  void run(std::size_t count, const std::function<void(std::size_t)>& task) override {
    if (count == 0) return;
    std::lock_guard<std::mutex> serial(run_mutex_);
    if (workers_.empty() || count == 1) {
      for (std::size_t i = 0; i < count; ++i) task(i);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      count_ = count;
      next_.store(0, std::memory_order_relaxed);
      unfinished_ = count;
      ++generation_;
    }
    wake_.notify_all();
    const std::size_t mine = drain(task, count);
    std::unique_lock<std::mutex> lock(mutex_);
    unfinished_ -= mine;
    // Wait for the tasks and for every worker that picked this job up: a
    // worker still inside drain() must not meet the next job's counter.
    done_.wait(lock, [this] { return unfinished_ == 0 && active_ == 0; });
    task_ = nullptr;
  }

 private:
  std::size_t drain(const std::function<void(std::size_t)>& task, std::size_t count) {
    std::size_t finished = 0;
    for (std::size_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < count;) {
      task(i);
      ++finished;
    }
    return finished;
  }

  void work_loop() {
    std::size_t seen = 0;
    for (;;) {
      const std::function<void(std::size_t)>* task;
      std::size_t count;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && task_); });
        if (stopping_) return;
        seen = generation_;
        task = task_;
        count = count_;
        ++active_;
      }
      const std::size_t finished = drain(*task, count);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        unfinished_ -= finished;
        --active_;
      }
      done_.notify_all();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t)>* task_ = nullptr;
  std::size_t count_ = 0;
  std::atomic<std::size_t> next_{0};
  std::size_t unfinished_ = 0;
  std::size_t active_ = 0;
  std::size_t generation_ = 0;
  bool stopping_ = false;
};

}  // namespace smax
