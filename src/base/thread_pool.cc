#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#if defined(__linux__)
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>
#endif

namespace nee {

namespace {
// How long an idle worker polls before sleeping on the condition variable:
// about a millisecond (PAUSE is ~140 cycles on this machine's Xeons). Waking a
// sleeping worker costs far more on a virtual machine, whose idle vCPU halts:
// with a 0.2 ms spin the worker fell asleep between MobileNetV2's layers and
// two threads ran slower than one (measured: 16 ms -> 10.5 ms a run at 2
// threads beside another runtime's idle threads; alone, 10.4 -> 9.0 ms).
constexpr int kSpinIterations = 20000;
// How long an idle worker then keeps polling between yields (see WaitForWork).
constexpr std::chrono::milliseconds kYieldingWait{250};
// PAUSEs between two yields while spinning, and how long a yield may take
// before it means another thread ran on this core (an uncontended yield is a
// system call of a microsecond or two).
constexpr int kPollsPerCheck = 512;
constexpr std::chrono::microseconds kContendedYield{100};
// While polling between yields: how often to look at the whole machine's
// runnable threads, and how long to step aside while there are more of them
// than CPUs (see MachineOversubscribed).
constexpr std::chrono::milliseconds kMachineCheckInterval{1};
constexpr std::chrono::microseconds kStepAside{500};

// The CPUs this process may run on (at least 1).
int AllowedCpus() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

// Keeps a worker off its caller's CPU. Where no CPU is idle, the scheduler
// wakes a worker beside its waker, and the two then take turns on one CPU
// while the other runs someone else's work: no loop runs faster, and the
// worker's chunks hold the caller up. Off that CPU, the worker shares
// another one with whatever runs there, and its chunks run beside the
// caller's. MobileNetV2 at 2 threads beside one spinning process (40 runs,
// medians): 8.9-9.5 ms, its 1-thread time, with the worker woken beside the
// caller; 7.3 ms kept off it. Only for a pool no larger than the CPUs it may
// use (more threads than that share CPUs anyway), and where the caller's CPU
// is one of them.
class CallerCpuAvoidance {
 public:
  explicit CallerCpuAvoidance(int pool_threads) {
#if defined(__linux__)
    CPU_ZERO(&allowed_);
    usable_ = sched_getaffinity(0, sizeof(allowed_), &allowed_) == 0 && pool_threads <= CPU_COUNT(&allowed_);
#else
    (void)pool_threads;
#endif
  }
  // Called with each job's caller CPU; changes the affinity only when that moved.
  void Avoid(int caller_cpu) {
#if defined(__linux__)
    if (!usable_ || caller_cpu < 0 || caller_cpu == avoided_ || caller_cpu >= CPU_SETSIZE ||
        !CPU_ISSET(caller_cpu, &allowed_))
      return;
    cpu_set_t others = allowed_;
    CPU_CLR(caller_cpu, &others);
    if (sched_setaffinity(0, sizeof(others), &others) != 0) usable_ = false;
    avoided_ = caller_cpu;
#else
    (void)caller_cpu;
#endif
  }

 private:
#if defined(__linux__)
  cpu_set_t allowed_;  // the worker's affinity when it started
#endif
  bool usable_ = false;
  int avoided_ = -1;
};

// Whether more threads are runnable on the whole machine than this process
// has CPUs (the poller itself counted): /proc/loadavg's fourth field,
// "running/total", a few microseconds to read. A yield only sees its own
// CPU's run queue: a poller alone on one vCPU, while another process's two
// threads share the other, yields and comes straight back, and the
// scheduler does not move one of those threads to a CPU that looks busy.
// MobileNetV2 at 2 threads, two nee processes taking turns 100 ms apart:
// one of them ran at its 1-thread time (~10 ms against ~6.5) for its whole
// life.
bool MachineOversubscribed(int cpus) {
#if defined(__linux__)
  const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[128];
  const ssize_t got = ::read(fd, text, sizeof(text) - 1);
  ::close(fd);
  if (got <= 0) return false;
  text[got] = '\0';
  const char* p = text;
  for (int field = 0; field < 3 && p; ++field) {
    p = std::strchr(p, ' ');
    if (p) ++p;
  }
  return p && std::atoi(p) > cpus;
#else
  (void)cpus;
  return false;
#endif
}
}  // namespace

ThreadPool::ThreadPool(int num_threads, bool allow_spinning)
    : allow_spinning_(allow_spinning), allowed_cpus_(AllowedCpus()) {
  int workers = std::max(1, num_threads) - 1;
  shares_ = std::make_unique<Share[]>(static_cast<size_t>(workers + 1));
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this, i] { WorkerLoop(i + 1); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool::ShareCut ThreadPool::CutShare(int64_t size, int64_t min_chunk) {
  ShareCut cut;
  if (size <= 0) return cut;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int64_t quarter = (size + 3) / 4;
  int64_t at = 0;
  while (at < size) {
    const int64_t left = size - at;
    int64_t chunk = std::max(min_chunk, std::min(quarter, (left + 1) / 2));
    // The last chunk: what a smaller one would leave is below min_chunk, or no chunks are left to cut.
    if (left - chunk < min_chunk || cut.chunks + 1 == kMaxChunksPerShare) chunk = left;
    at += chunk;
    cut.bounds[++cut.chunks] = at;
  }
  return cut;
}

void ThreadPool::RunChunks(Job& job, int thread) {
  for (int k = 0; k < job.threads; ++k) {
    Share& share = job.shares[(thread + k) % job.threads];
    for (int64_t index = share.next.fetch_add(1, std::memory_order_relaxed); index < share.cut.chunks;
         index = share.next.fetch_add(1, std::memory_order_relaxed)) {
      (*job.fn)(share.begin + share.cut.bounds[index], share.begin + share.cut.bounds[index + 1]);
      job.chunks_done.fetch_add(1, std::memory_order_acq_rel);
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  // One share per thread, fewer where the loop has fewer than min_chunk elements a thread.
  const int64_t shares = std::min<int64_t>(num_threads(), (n + min_chunk - 1) / min_chunk);
  if (shares <= 1 || workers_.empty() || !busy_.try_lock()) {
    fn(0, n);
    return;
  }
  Job job;
  job.fn = &fn;
  job.threads = num_threads();
  job.caller_cpu = CurrentCpu();
  job.shares = shares_.get();
  for (int t = 0; t < job.threads; ++t) {
    Share& share = job.shares[t];
    share.begin = std::min(n, n * t / shares);
    share.cut = CutShare(std::min(n, n * (t + 1) / shares) - share.begin, min_chunk);
    share.next.store(0, std::memory_order_relaxed);
    job.chunks += share.cut.chunks;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &job;
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  RunChunks(job, 0);
  WaitForJob(job);
  busy_.unlock();
}

int CurrentCpu() {
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

bool ThreadPool::SharesCpuWithAWorker(const Job& job) {
  const int cpu = CurrentCpu();
  if (cpu < 0) return false;
  for (int t = 1; t < job.threads; ++t)
    if (job.shares[t].cpu.load(std::memory_order_relaxed) == cpu) return true;
  return false;
}

void ThreadPool::WaitForJob(const Job& job) {
  // Every chunk is claimed; wait for the ones still running, and for every
  // worker to leave the job before it goes out of scope. A worker on this
  // CPU runs only when this thread does not: polling would hold its chunk
  // up (until the scheduler preempts the poller), so then sleep at once.
  auto finished = [&] {
    return job.chunks_done.load(std::memory_order_acquire) == job.chunks &&
           workers_in_job_.load(std::memory_order_acquire) == 0;
  };
  for (int i = 0; i < kSpinIterations && !finished(); ++i) {
    CpuRelax();
    if (i % kPollsPerCheck == 0 && SharesCpuWithAWorker(job)) break;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!finished()) {
    caller_sleeping_ = true;
    done_cv_.wait(lock, finished);
    caller_sleeping_ = false;
  }
  // Under mu_, so no worker can still be between reading job_ and raising
  // workers_in_job_.
  job_ = nullptr;
}

bool ThreadPool::WaitForWork(uint64_t seen) {
  if (allow_spinning_) SpinForWork(seen);
  std::unique_lock<std::mutex> lock(mu_);
  work_cv_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
  return !stop_;
}

void ThreadPool::SpinForWork(uint64_t seen) const {
  // More threads runnable than CPUs (this one counted): a polling worker
  // holds a CPU the caller's or another process's work needs, and when a
  // yield hands it over, the worker gets it back only after that work's time
  // slice, too late for the next loops (MobileNetV2 beside a spinning
  // process: the worker ran 2-4% of the chunks). Asleep, it is woken onto a
  // CPU when its caller posts work (off the caller's, see
  // CallerCpuAvoidance) and runs its share there. Beside one spinning
  // process, 2 threads against 1 (bench/busy_core.py, 16 rounds):
  // MobileNetV2 0.87 -> 0.80, YOLO 1.00 -> 0.74, ResNet-50 0.98 -> 0.73.
  // Looked at no more than once a millisecond (a read of /proc).
  thread_local std::chrono::steady_clock::time_point next_look{};
  thread_local bool oversubscribed = false;
  const auto start = std::chrono::steady_clock::now();
  if (start >= next_look) {
    oversubscribed = MachineOversubscribed(allowed_cpus_);
    next_look = start + kMachineCheckInterval;
  }
  if (oversubscribed) return;
  for (int i = 0; i < kSpinIterations; ++i) {
    if (generation_.load(std::memory_order_acquire) != seen) return;
    CpuRelax();
    // Every so often, ask whether other work wants this core (below).
    if (i % kPollsPerCheck == kPollsPerCheck - 1 && OtherWorkWaiting()) return;
  }
  // Then keep the core awake, yielding it to any other runnable thread, for
  // a while longer: on this VM a vCPU that goes idle for even 20 ms comes back
  // so slowly that the next run's first parallel loops ran on one thread
  // (MobileNetV2, 2 threads, 100 ms between runs: 17.0 ms a run, 11.3 ms with
  // this, 10.4 ms back to back).
  // Every millisecond it also looks at the whole machine: while more threads
  // are runnable than this process has CPUs, it sleeps in short steps
  // instead (the CPU free for them, and back to polling once they are done:
  // another runtime's threads spin for tens of milliseconds after its run).
  const auto until = std::chrono::steady_clock::now() + kYieldingWait;
  auto next_check = std::chrono::steady_clock::now() + kMachineCheckInterval;
  for (auto now = std::chrono::steady_clock::now(); now < until; now = std::chrono::steady_clock::now()) {
    if (generation_.load(std::memory_order_acquire) != seen) return;
    if (now >= next_check) {
      if (MachineOversubscribed(allowed_cpus_)) {  // looked at again after the step
        std::this_thread::sleep_for(kStepAside);
        continue;
      }
      next_check = now + kMachineCheckInterval;
    }
    if (OtherWorkWaiting()) return;
  }
}

// Yields the core once and says whether another thread took it meanwhile (the
// yield came back late). Then this worker should sleep instead of polling: a
// polling thread uses up its share of a contended core, so the scheduler
// runs it late when work does arrive, and the caller waits for its chunks
// (MobileNetV2, 2 threads, both cores busy with compilers: twice the
// one-thread time when polling on, level with it when asleep). A busy core
// does not go idle, so waking a sleeper there is cheap.
bool ThreadPool::OtherWorkWaiting() {
  const auto before = std::chrono::steady_clock::now();
  std::this_thread::yield();
  return std::chrono::steady_clock::now() - before > kContendedYield;
}

void ThreadPool::WorkerLoop(int thread) {
  // Made at the first job (the pool's size known from it: the constructor may
  // still be adding workers), before anything changed this thread's mask.
  std::optional<CallerCpuAvoidance> avoidance;
  uint64_t seen = 0;
  for (;;) {
    if (!WaitForWork(seen)) return;
    Job* job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      seen = generation_.load(std::memory_order_acquire);
      job = job_;
      if (!job) continue;  // woke after that loop had finished
      ++workers_in_job_;
    }
    if (!avoidance) avoidance.emplace(job->threads);
    avoidance->Avoid(job->caller_cpu);
    Share& mine = job->shares[thread];
    mine.cpu.store(CurrentCpu(), std::memory_order_relaxed);
    RunChunks(*job, thread);
    mine.cpu.store(-1, std::memory_order_relaxed);
    bool wake_caller;
    {
      std::lock_guard<std::mutex> lock(mu_);
      workers_in_job_.fetch_sub(1, std::memory_order_acq_rel);
      wake_caller = caller_sleeping_;
    }
    if (wake_caller) done_cv_.notify_all();
  }
}

}  // namespace nee
