// A fixed pool of worker threads for intra-op parallelism.
//
// The session's thread count is respected exactly: a pool for N threads owns
// N-1 workers and the calling thread does the remaining share. Work is split
// into contiguous chunks; kernels must compute every output element the same
// way whatever the chunking, which keeps results bitwise deterministic.
// When two runs on one session call ParallelFor at once, the one that finds
// the pool busy runs its loop inline instead of waiting.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nee {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over [0, n) in chunks; `min_chunk` avoids spreading
  // tiny loops across threads.
  void ParallelFor(int64_t n, int64_t min_chunk,
                   const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);

  std::vector<std::thread> workers_;
  std::mutex busy_;  // held by the caller of an in-flight ParallelFor
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunks_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace nee
