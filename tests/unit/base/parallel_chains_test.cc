// ParallelChains: every link of every chain runs once, in order within its
// chain and after the previous link's writes; a thread that is slow (its core
// busy elsewhere) does not make the caller wait for the rest of its chain.
#include "base/parallel_chains.h"

#include <gtest/gtest.h>

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

// The worker's links are slow (as on a core it shares with another process:
// 0.3 ms each), the caller's fast: the caller finishes its chain, then takes
// the worker's over after the worker's current link instead of waiting for
// all of them (7.5 ms). The caller only takes over when it is running (not
// preempted by another process) when the worker ends a link; on a loaded
// machine it often is not, so the test asks for one take-over in many tries.
TEST(ParallelChains, CallerTakesOverASlowWorkersChain) {
  ThreadPool pool(2);
  constexpr int64_t kLinks = 25;
  bool took_over = false;
  for (int attempt = 0; attempt < 30 && !took_over; ++attempt) {
    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<int64_t> caller_links_of_chain1{0};
    std::atomic<bool> worker_started{false};
    std::vector<std::vector<int64_t>> seen(2);
    const auto start = std::chrono::steady_clock::now();
    ParallelChains(&pool, 2, kLinks, [&](int64_t chain, int64_t link) {
      seen[static_cast<size_t>(chain)].push_back(link);
      const bool on_caller = std::this_thread::get_id() == caller;
      if (on_caller && chain == 1) caller_links_of_chain1.fetch_add(1, std::memory_order_relaxed);
      if (chain == 1 && link == 0) worker_started.store(!on_caller);
      // The caller's chain waits for the worker to start its own (for up to
      // 100 ms), so that there is a chain to take over.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      while (chain == 0 && link == 0 && !worker_started.load() && std::chrono::steady_clock::now() < deadline) {
      }
      // Busy, as a kernel is (a sleeping thread would leave its CPU to the
      // other, which the scheduler may then move there).
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(on_caller ? 30 : 300);
      while (std::chrono::steady_clock::now() < until) {
      }
    });
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    for (const auto& links : seen) ASSERT_EQ(static_cast<int64_t>(links.size()), kLinks);
    // Half the worker's chain or more went to the caller, well before the
    // worker alone would have finished it.
    took_over = worker_started.load() && caller_links_of_chain1.load() >= kLinks / 2 && ms < 0.6 * kLinks * 0.3;
  }
  EXPECT_TRUE(took_over);
}

}  // namespace
}  // namespace nee
