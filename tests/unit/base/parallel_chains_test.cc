// ParallelChains: every link of every chain runs once, in order within its
// chain and after the previous link's writes; a thread that is slow (its core
// busy elsewhere) does not make the caller wait for the rest of its chain.
#include "base/parallel_chains.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "base/thread_pool.h"

namespace nee {
namespace {

// Each chain's links append their index to the chain's own (unsynchronized)
// vector: a link that ran twice, out of order, or without seeing the previous
// link's write shows up in the vector (and as a data race under TSan).
void ExpectEveryLinkOnceInOrder(ThreadPool* pool, int64_t chains, int64_t links) {
  std::vector<std::vector<int64_t>> seen(static_cast<size_t>(std::max<int64_t>(chains, 0)));
  std::atomic<int64_t> calls{0};
  ParallelChains(pool, chains, links, [&](int64_t chain, int64_t link) {
    ASSERT_GE(chain, 0);
    ASSERT_LT(chain, chains);
    std::vector<int64_t>& mine = seen[static_cast<size_t>(chain)];
    EXPECT_EQ(static_cast<int64_t>(mine.size()), link) << "chain " << chain;
    mine.push_back(link);
    calls.fetch_add(1, std::memory_order_relaxed);
  });
  EXPECT_EQ(calls.load(), std::max<int64_t>(chains, 0) * std::max<int64_t>(links, 0));
  for (const auto& mine : seen) {
    ASSERT_EQ(static_cast<int64_t>(mine.size()), std::max<int64_t>(links, 0));
    for (int64_t l = 0; l < static_cast<int64_t>(mine.size()); ++l) EXPECT_EQ(mine[static_cast<size_t>(l)], l);
  }
}

TEST(ParallelChains, EveryLinkOnceInOrderAtAnyThreadCount) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{0, 5}, {3, 0}, {1, 1}, {1, 7}, {2, 1},
                                                           {2, 16}, {3, 5}, {7, 3}, {64, 2}, {5, 200}};
  ExpectEveryLinkOnceInOrder(nullptr, 3, 4);
  for (int threads : {1, 2, 3, 4}) {
    for (bool spinning : {true, false}) {
      ThreadPool pool(threads, spinning);
      for (int round = 0; round < 5; ++round)
        for (auto [chains, links] : shapes) ExpectEveryLinkOnceInOrder(&pool, chains, links);
    }
  }
}

// Links that take a while (so threads really overlap and hand chains over).
TEST(ParallelChains, SlowLinksStillOnceInOrder) {
  ThreadPool pool(2);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::vector<int64_t>> seen(3);
    ParallelChains(&pool, 3, 12, [&](int64_t chain, int64_t link) {
      std::vector<int64_t>& mine = seen[static_cast<size_t>(chain)];
      EXPECT_EQ(static_cast<int64_t>(mine.size()), link);
      mine.push_back(link);
      std::this_thread::sleep_for(std::chrono::microseconds(50 * (1 + chain)));
    });
    for (const auto& mine : seen) EXPECT_EQ(mine.size(), 12u);
  }
}

// A called from inside a loop of the same pool (the pool is busy) runs inline.
TEST(ParallelChains, NestedInsideAPoolLoop) {
  ThreadPool pool(2);
  pool.ParallelFor(2, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) ExpectEveryLinkOnceInOrder(&pool, 2, 6);
  });
}

#if defined(__linux__)
// The first two CPUs this process may run on (fewer where it has fewer).
std::vector<int> FirstTwoCpus(const cpu_set_t& allowed) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  return cpus;
}

// Pins the calling thread to one CPU; false if the kernel refuses.
bool PinThisThread(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return sched_setaffinity(0, sizeof one, &one) == 0;
}

// The worker's links are slow (as on a core it shares with another process:
// 0.3 ms each), the caller's fast: the caller finishes its chain, then takes
// the worker's over after the worker's current link instead of waiting for
// all of them. The two run on different CPUs (a caller on the worker's CPU
// rightly leaves it alone). The caller only takes over when it is running
// (not preempted by another process) as the worker ends a link; on a loaded
// machine it often is not, so the test asks for one take-over in many tries.
TEST(ParallelChains, CallerTakesOverASlowWorkersChain) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(0, sched_getaffinity(0, sizeof allowed, &allowed));
  const std::vector<int> cpus = FirstTwoCpus(allowed);
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs: the test pins the caller and the worker apart";
  ASSERT_TRUE(PinThisThread(cpus[0]));
  constexpr int64_t kLinks = 25;
  int attempts = 0;
  bool took_over = false;
  {
    ThreadPool pool(2);  // its worker starts on the caller's CPU and moves itself
    const std::thread::id caller = std::this_thread::get_id();
    for (; attempts < 100 && !took_over; ++attempts) {
      std::atomic<int64_t> caller_links_of_chain1{0};
      std::atomic<bool> worker_started{false};
      std::vector<std::vector<int64_t>> seen(2);
      ParallelChains(&pool, 2, kLinks, [&](int64_t chain, int64_t link) {
        seen[static_cast<size_t>(chain)].push_back(link);
        const bool on_caller = std::this_thread::get_id() == caller;
        if (!on_caller) PinThisThread(cpus[1]);
        if (on_caller && chain == 1) caller_links_of_chain1.fetch_add(1, std::memory_order_relaxed);
        if (chain == 1 && link == 0) worker_started.store(!on_caller);
        // The caller's chain waits for the worker to start its own (for up
        // to 100 ms), so that there is a chain to take over.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        while (chain == 0 && link == 0 && !worker_started.load() && std::chrono::steady_clock::now() < deadline) {
        }
        // Busy, as a kernel is.
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(on_caller ? 30 : 300);
        while (std::chrono::steady_clock::now() < until) {
        }
      });
      for (const auto& links : seen) ASSERT_EQ(static_cast<int64_t>(links.size()), kLinks);
      // The worker had started chain 1, and the caller ran links of it.
      took_over = worker_started.load() && caller_links_of_chain1.load() > 0;
    }
  }
  ASSERT_EQ(0, sched_setaffinity(0, sizeof allowed, &allowed));
  EXPECT_TRUE(took_over) << attempts << " attempts";
}
// The worker stops running in the middle of its chain (here it sleeps; on a
// busy machine another process takes its core): the caller, its own chain
// done, finds the worker's CPU time standing still, moves the worker onto its
// own CPU and sleeps until the chain is finished. The worker's later links
// run on the caller's CPU, and it gets its affinity back when the run ends.
TEST(ParallelChains, StalledHolderMovesToTheAskersCpu) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(0, sched_getaffinity(0, sizeof allowed, &allowed));
  const std::vector<int> cpus = FirstTwoCpus(allowed);
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs: the test pins the caller and the worker apart";
  ASSERT_TRUE(PinThisThread(cpus[0]));
  constexpr int64_t kLinks = 12;
  bool moved = false;
  int attempts = 0;
  {
    ThreadPool pool(2);
    const std::thread::id caller = std::this_thread::get_id();
    for (; attempts < 20 && !moved; ++attempts) {
      std::atomic<bool> worker_started{false};
      std::vector<std::vector<int64_t>> seen(2);
      std::vector<int> worker_cpus;  // the CPU of each of the worker's links of chain 1
      cpu_set_t worker_mask_inside, worker_mask_after;
      CPU_ZERO(&worker_mask_inside);
      CPU_ZERO(&worker_mask_after);
      ParallelChains(&pool, 2, kLinks, [&](int64_t chain, int64_t link) {
        seen[static_cast<size_t>(chain)].push_back(link);
        const bool on_caller = std::this_thread::get_id() == caller;
        if (chain == 1 && link == 0 && !on_caller) {
          // Start on the other CPU with the process's whole affinity back.
          ASSERT_EQ(0, sched_setaffinity(0, sizeof allowed, &allowed));
          PinThisThread(cpus[1]);
          ASSERT_EQ(0, sched_setaffinity(0, sizeof allowed, &allowed));
          worker_started.store(true);
        }
        if (chain == 1 && !on_caller) worker_cpus.push_back(sched_getcpu());
        // The caller's chain waits for the worker to start its own.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        while (chain == 0 && link == 0 && !worker_started.load() && std::chrono::steady_clock::now() < deadline) {
        }
        // The worker stops running for a while in its second link.
        if (chain == 1 && link == 1 && !on_caller) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (chain == 1 && link == kLinks - 1 && !on_caller)
          sched_getaffinity(0, sizeof worker_mask_inside, &worker_mask_inside);
      });
      for (const auto& links : seen) ASSERT_EQ(static_cast<int64_t>(links.size()), kLinks);
      // After the run: the worker's affinity, read from a loop it runs.
      std::atomic<bool> read{false};
      pool.ParallelFor(2, 1, [&](int64_t begin, int64_t) {
        if (std::this_thread::get_id() != caller && begin == 1) {
          sched_getaffinity(0, sizeof worker_mask_after, &worker_mask_after);
          read.store(true);
        }
      });
      // Moved: its last link of chain 1 ran pinned to the caller's CPU.
      if (!worker_started.load() || worker_cpus.size() != static_cast<size_t>(kLinks)) continue;
      moved = CPU_COUNT(&worker_mask_inside) == 1 && CPU_ISSET(cpus[0], &worker_mask_inside) &&
              worker_cpus.back() == cpus[0];
      if (moved && read.load()) EXPECT_TRUE(CPU_EQUAL(&worker_mask_after, &allowed));
    }
  }
  ASSERT_EQ(0, sched_setaffinity(0, sizeof allowed, &allowed));
  EXPECT_TRUE(moved) << attempts << " attempts";
}
// A worker that starts its part on the caller's CPU (where the scheduler
// puts a woken thread beside its waker when no CPU is idle: here a thread
// spins on the other one) moves to another CPU before it runs a link: the
// pool keeps it off its caller's CPU (thread_pool.h), with the rest of its
// affinity.
TEST(ParallelChains, WorkerStepsOffTheCallersCpu) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(0, sched_getaffinity(0, sizeof allowed, &allowed));
  const std::vector<int> cpus = FirstTwoCpus(allowed);
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs: the test pins the caller and the worker apart";
  // The other CPU busy (no idle CPU for the scheduler to wake the worker on).
  std::atomic<bool> stop_spinner{false};
  std::thread spinner([&] {
    PinThisThread(cpus[1]);
    while (!stop_spinner.load(std::memory_order_relaxed)) {
    }
  });
  ThreadPool pool(2, /*allow_spinning=*/false);
  const std::thread::id caller = std::this_thread::get_id();
  bool stepped_off = false;
  int attempts = 0;
  for (; attempts < 20 && !stepped_off; ++attempts) {
    // Put the worker on cpus[0] with its whole affinity, then the caller.
    pool.ParallelFor(2, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() == caller) return;
      PinThisThread(cpus[0]);
      sched_setaffinity(0, sizeof allowed, &allowed);
    });
    ASSERT_TRUE(PinThisThread(cpus[0]));
    std::atomic<int> worker_cpu{-1};
    std::atomic<bool> worker_started{false};
    cpu_set_t worker_mask;
    CPU_ZERO(&worker_mask);
    ParallelChains(&pool, 2, 4, [&](int64_t chain, int64_t link) {
      if (std::this_thread::get_id() != caller) {
        if (!worker_started.exchange(true)) {
          worker_cpu.store(sched_getcpu());
          sched_getaffinity(0, sizeof worker_mask, &worker_mask);
        }
        return;
      }
      // The caller's first link waits (on its CPU) for the worker to start.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      while (chain == 0 && link == 0 && !worker_started.load() && std::chrono::steady_clock::now() < deadline) {
      }
    });
    ASSERT_EQ(0, sched_setaffinity(0, sizeof allowed, &allowed));
    if (!worker_started.load()) continue;
    stepped_off = worker_cpu.load() != cpus[0];
    cpu_set_t all_but_callers = allowed;
    CPU_CLR(cpus[0], &all_but_callers);
    if (stepped_off) EXPECT_TRUE(CPU_EQUAL(&worker_mask, &all_but_callers));
  }
  stop_spinner.store(true);
  spinner.join();
  EXPECT_TRUE(stepped_off) << attempts << " attempts";
}
#endif

}  // namespace
}  // namespace nee
