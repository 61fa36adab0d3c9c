// ThreadPool: loops cover every index once, with spinning on or off, and with
// spinning off (ONNX Runtime's session.intra_op.allow_spinning=0) idle
// workers sleep at once: the process uses no CPU after the loop.
#include "base/thread_pool.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace nee {
namespace {

// User + system CPU time of the whole process (every thread), in seconds.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

int64_t SumOfIndices(ThreadPool& pool, int64_t n) {
  std::atomic<int64_t> sum{0};
  pool.ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) sum += i;
  });
  return sum.load();
}

TEST(ThreadPool, EveryIndexOnceWithAndWithoutSpinning) {
  for (bool spinning : {true, false}) {
    ThreadPool pool(3, spinning);
    EXPECT_EQ(pool.allow_spinning(), spinning);
    for (int round = 0; round < 20; ++round) EXPECT_EQ(SumOfIndices(pool, 1000), 999 * 1000 / 2);
  }
}

TEST(ThreadPool, WithoutSpinningIdleWorkersUseNoCpu) {
  ThreadPool pool(3, /*allow_spinning=*/false);
  ASSERT_EQ(SumOfIndices(pool, 100000), int64_t{99999} * 100000 / 2);
  const double before = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Two spinning workers would use up to 0.4 s here (each polls for 250 ms).
  EXPECT_LT(ProcessCpuSeconds() - before, 0.02);
  EXPECT_EQ(SumOfIndices(pool, 1000), 999 * 1000 / 2);  // and they wake for the next loop
}

void BusyFor(std::chrono::microseconds span) {
  const auto until = std::chrono::steady_clock::now() + span;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// One loop over [0, n) in the pool's chunks; chunks the workers run sleep
// `worker_stall` first. Returns the chunks the workers ran; every index must
// run exactly once and every chunk must be one of `cut` (filled on first use).
int64_t LoopWithStalledWorkers(ThreadPool& pool, int64_t n, std::chrono::microseconds worker_stall,
                               std::set<std::pair<int64_t, int64_t>>& cut) {
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
  std::atomic<int64_t> worker_chunks{0};
  std::mutex mu;
  std::set<std::pair<int64_t, int64_t>> seen;
  pool.ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
    if (std::this_thread::get_id() != caller) {
      ++worker_chunks;
      std::this_thread::sleep_for(worker_stall);
    } else {
      BusyFor(std::chrono::microseconds(200));  // time for the worker to join the loop
    }
    for (int64_t i = begin; i < end; ++i) ++runs[static_cast<size_t>(i)];
    std::lock_guard<std::mutex> lock(mu);
    seen.insert({begin, end});
  });
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(runs[static_cast<size_t>(i)].load(), 1) << "index " << i;
  if (cut.empty()) cut = seen;
  EXPECT_EQ(seen, cut);  // the same chunks whoever ran them
  return worker_chunks.load();
}

// A worker that stalls in every chunk it takes costs the caller at most the
// chunk it holds: the caller takes the rest, each chunk runs once, in the same
// cut every time.
TEST(ThreadPool, StalledWorkerHoldsUpOnlyItsChunk) {
  ThreadPool pool(2);
  std::set<std::pair<int64_t, int64_t>> cut;
  // Margins for a loaded CI machine (sanitizers, parallel tests): a caller
  // descheduled for a whole stall may let the worker take a second chunk,
  // but a worker that held the loop up would run about half of the eight.
  const auto stall = std::chrono::milliseconds(50);
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    const int64_t worker_chunks = LoopWithStalledWorkers(pool, 64, stall, cut);
    EXPECT_LE(worker_chunks, 2) << "round " << round;  // a stalled chunk, then the caller has the rest
    EXPECT_LT(std::chrono::steady_clock::now() - start, 4 * stall) << "round " << round;
  }
  EXPECT_EQ(cut.size(), 14u);  // 8 + 8 + 8 + 4 + 2 + 1 + 1 in each thread's share of 32
}

// A share is cut into quarters while more than a quarter is left, then
// halves of the rest; no chunk below min_chunk (the last takes what a
// smaller one would leave), at most kMaxChunksPerShare.
TEST(ThreadPool, SharesEndInSmallerChunks) {
  auto sizes = [](int64_t size, int64_t min_chunk) {
    const ThreadPool::ShareCut cut = ThreadPool::CutShare(size, min_chunk);
    std::vector<int64_t> out;
    EXPECT_EQ(cut.bounds[0], 0);
    for (int c = 0; c < cut.chunks; ++c) out.push_back(cut.bounds[c + 1] - cut.bounds[c]);
    return out;
  };
  using V = std::vector<int64_t>;
  EXPECT_EQ(sizes(32, 1), (V{8, 8, 8, 4, 2, 1, 1}));
  EXPECT_EQ(sizes(64, 1), (V{16, 16, 16, 8, 4, 2, 1, 1}));
  EXPECT_EQ(sizes(1000, 1), (V{250, 250, 250, 125, 63, 31, 16, 15}));  // the eighth takes the rest
  EXPECT_EQ(sizes(4, 1), (V{1, 1, 1, 1}));
  EXPECT_EQ(sizes(3, 1), (V{1, 1, 1}));
  EXPECT_EQ(sizes(1000, 100), (V{250, 250, 250, 125, 125}));  // 100 would leave 25
  EXPECT_EQ(sizes(150, 100), (V{150}));
  EXPECT_EQ(sizes(0, 1), V{});
  for (int64_t size = 1; size < 300; ++size)
    for (int64_t min_chunk : {1, 2, 7, 64}) {
      const V cut = sizes(size, min_chunk);
      int64_t sum = 0;
      for (size_t c = 0; c < cut.size(); ++c) {
        EXPECT_TRUE(cut[c] >= min_chunk || cut.size() == 1) << size << " " << min_chunk;
        // Never larger than the one before, but for a last one of less than two min_chunks.
        if (c > 0 && cut[c] > cut[c - 1])
          EXPECT_TRUE(c + 1 == cut.size() && cut[c] < 2 * min_chunk) << size << " " << min_chunk;
        sum += cut[c];
      }
      EXPECT_EQ(sum, size);
      EXPECT_LE(cut.size(), static_cast<size_t>(ThreadPool::kMaxChunksPerShare));
    }
}

#if defined(__linux__)
double ThreadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

// Caller and worker on one CPU (the pool built while the caller is pinned
// there: its worker inherits the pin). The worker takes its chunk while the
// caller's waits for it, then computes for 2 ms of CPU time. The caller,
// done with its own chunk, finds the worker on its CPU and sleeps at once
// instead of polling (up to ~0.5 ms a loop of the time the worker needs).
TEST(ThreadPool, CallerDoesNotPollOnItsWorkersCpu) {
  cpu_set_t allowed, one;
  ASSERT_EQ(0, sched_getaffinity(0, sizeof allowed, &allowed));
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  ASSERT_EQ(0, sched_setaffinity(0, sizeof one, &one));
  double caller_waiting_ms = 0;
  int waits = 0;
  {
    ThreadPool pool(2);
    for (int loop = 0; loop < 20; ++loop) {
      std::atomic<bool> worker_started{false};
      const std::thread::id caller = std::this_thread::get_id();
      double own_chunk_done = 0;
      bool waited = false;
      pool.ParallelFor(2, 1, [&](int64_t begin, int64_t) {
        if (std::this_thread::get_id() != caller) {
          worker_started = true;
          const double until = ThreadCpuMs() + 2.0;
          while (ThreadCpuMs() < until) {
          }
          return;
        }
        if (begin != 0) return;  // the worker's chunk, when it never came
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        while (!worker_started && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        waited = worker_started;
        own_chunk_done = ThreadCpuMs();
      });
      if (!waited) continue;
      caller_waiting_ms += ThreadCpuMs() - own_chunk_done;
      ++waits;
    }
  }
  ASSERT_EQ(0, sched_setaffinity(0, sizeof allowed, &allowed));
  if (waits == 0) GTEST_SKIP() << "the worker never ran while the caller waited";
  // Polling through each wait would take ~0.5 ms of CPU a loop.
  EXPECT_LT(caller_waiting_ms / waits, 0.15) << waits << " waits";
}

// A worker keeps off the CPU its caller posted the loop from (beside other
// work, a worker woken there only takes turns with its caller): its
// affinity is the one it started with less the caller's CPU. Where only
// one CPU is allowed, nothing changes.
TEST(ThreadPool, WorkerKeepsOffItsCallersCpu) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(0, sched_getaffinity(0, sizeof allowed, &allowed));
  ThreadPool pool(2);  // its worker starts with the whole mask
  const int caller_cpu = sched_getcpu();
  ASSERT_GE(caller_cpu, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(caller_cpu, &one);
  ASSERT_EQ(0, sched_setaffinity(0, sizeof one, &one));  // the caller stays where it is
  cpu_set_t expected = allowed;
  if (CPU_COUNT(&allowed) >= 2) CPU_CLR(caller_cpu, &expected);
  int worker_loops = 0;
  bool as_expected = true;
  const std::thread::id caller = std::this_thread::get_id();
  for (int loop = 0; loop < 20; ++loop) {
    std::atomic<bool> worker_started{false};
    pool.ParallelFor(2, 1, [&](int64_t begin, int64_t) {
      if (std::this_thread::get_id() != caller) {
        cpu_set_t mine;
        CPU_ZERO(&mine);
        as_expected = as_expected && sched_getaffinity(0, sizeof mine, &mine) == 0 && CPU_EQUAL(&mine, &expected) &&
                      (CPU_COUNT(&allowed) < 2 || sched_getcpu() != caller_cpu);
        ++worker_loops;
        worker_started = true;
        return;
      }
      if (begin != 0) return;  // the worker's chunk, when it never came
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      while (!worker_started && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    });
  }
  ASSERT_EQ(0, sched_setaffinity(0, sizeof allowed, &allowed));
  EXPECT_GT(worker_loops, 0);
  EXPECT_TRUE(as_expected);
}
#endif

}  // namespace
}  // namespace nee
