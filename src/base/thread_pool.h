// A fixed pool of worker threads for intra-op parallelism.
//
// The session's thread count is respected exactly: a pool for N threads owns
// N-1 workers and the calling thread works too. A loop's range is cut into
// one contiguous share per thread (the caller is thread 0, worker i thread
// i + 1), and each share into fixed chunks (the same cut whoever runs them;
// ShareCut). Each thread first runs its own share's chunks, in order, then
// claims what is left of the others' shares, front first: on a busy machine
// a worker that wakes late simply does fewer chunks instead of holding
// everyone up, and otherwise the same thread runs the same chunks every time,
// so the data a loop writes stays in that thread's caches for the next loop
// over the same range and the next run. (Claiming chunks one at a time from a
// single counter interleaved them between threads differently on every call;
// on this VM, where the host sometimes places the two vCPUs far apart, every
// line the other core wrote is slow to fetch.)
// A share's chunks get smaller towards its end (three quarters in quarters,
// the last quarter halved again and again), so that a thread that runs a
// little slower than the others (on this VM the worker's vCPU often does, by
// ~5%) leaves small chunks for them to take, rather than the whole last
// quarter of its share while they wait.
// Kernels must compute every output element the same way whatever the
// chunking, which keeps results bitwise deterministic.
// When two runs on one session call ParallelFor at once, the one that finds
// the pool busy runs its loop inline instead of waiting.
//
// Beside other work (more threads runnable than CPUs) two things change, so
// that the second thread still pays (MobileNetV2 beside one spinning process:
// 2 threads no faster than 1 before; thread_pool.cc, CallerCpuAvoidance and
// SpinForWork):
// a worker keeps off the CPU its caller last ran on, and it sleeps as soon as
// it is idle instead of polling.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace nee {

// The CPU the calling thread runs on, -1 where unknown.
int CurrentCpu();

// One step of a spin-wait: PAUSE on x86 (it eases the core for its sibling
// thread and the loop's exit), a yield elsewhere.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

class ThreadPool {
 public:
  // allow_spinning false (ONNX Runtime's session.intra_op.allow_spinning=0):
  // idle workers sleep at once instead of polling for the next loop, so an
  // idle session uses no CPU (the next loop pays a wake-up per worker).
  explicit ThreadPool(int num_threads, bool allow_spinning = true);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  bool allow_spinning() const { return allow_spinning_; }

  // Calls fn(begin, end) over [0, n) in chunks of at least `min_chunk`
  // elements (so tiny loops are not spread across threads).
  void ParallelFor(int64_t n, int64_t min_chunk,
                   const std::function<void(int64_t, int64_t)>& fn);

  // Most chunks a thread's share is cut into.
  static constexpr int kMaxChunksPerShare = 8;
  // How a share of `size` elements is cut: bounds[0] = 0 < bounds[1] < ... <
  // bounds[chunks] = size. Chunks of a quarter of the share while more than a
  // quarter is left, then of half of what is left, none below `min_chunk`
  // (the last takes whatever a smaller one would leave) and at most
  // kMaxChunksPerShare of them.
  struct ShareCut {
    int chunks = 0;
    int64_t bounds[kMaxChunksPerShare + 1] = {};
  };
  static ShareCut CutShare(int64_t size, int64_t min_chunk);

 private:
  // One thread's share of a loop: where it starts, how it is cut, and the
  // next unclaimed chunk. Its own cache lines, so claiming from one's own
  // share touches no line the other threads write.
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t begin = 0;
    ShareCut cut;
    // While a worker runs chunks of a job: the CPU it started on (-1 else).
    std::atomic<int> cpu{-1};
  };

  struct Job {
    const std::function<void(int64_t, int64_t)>* fn = nullptr;
    int caller_cpu = -1;  // the CPU the caller ran on when it posted the job
    int64_t chunks = 0;  // in all shares
    Share* shares = nullptr;  // num_threads() of them
    int threads = 1;
    std::atomic<int64_t> chunks_done{0};
  };

  void WorkerLoop(int thread);
  // Runs chunks of `job` as thread `thread`: its own share, then the others'.
  static void RunChunks(Job& job, int thread);
  // Waits for a generation other than `seen` (spinning briefly first, when
  // allowed, since a kernel's next loop usually follows within microseconds);
  // false on stop.
  bool WaitForWork(uint64_t seen);
  // The polling part of WaitForWork: returns when the generation moved on or
  // the polling time is over, at once when the machine is oversubscribed.
  void SpinForWork(uint64_t seen) const;
  static bool OtherWorkWaiting();
  // The caller's wait for the last chunks of its job: polls briefly (the
  // remaining chunks usually finish within microseconds, and a sleep/wake
  // round trip through the kernel costs tens), then sleeps; at once when a
  // worker still in the job runs on the caller's CPU.
  void WaitForJob(const Job& job);
  static bool SharesCpuWithAWorker(const Job& job);

  const bool allow_spinning_;
  // The CPUs the workers may use (the creating thread's affinity, which they
  // inherit; read before any of them narrows its own).
  const int allowed_cpus_;
  std::vector<std::thread> workers_;
  std::mutex busy_;  // held by the caller of an in-flight ParallelFor
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  Job* job_ = nullptr;             // guarded by mu_
  // Workers that may still touch job_: raised under mu_, lowered without it
  // so the caller can poll it while spinning.
  std::atomic<int> workers_in_job_{0};
  bool caller_sleeping_ = false;   // guarded by mu_: the caller waits on done_cv_
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;              // guarded by mu_
  std::unique_ptr<Share[]> shares_;  // the in-flight loop's (one loop at a time: busy_)
};

}  // namespace nee
