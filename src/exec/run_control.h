// What bounds one run: the caller's terminate flag, a time limit and a memory
// limit. A model may legitimately loop for a very long time or allocate a lot
// (a valid Loop with a huge trip count); these are how a caller keeps such a
// model from hanging or exhausting the process, with an error instead.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/thread_pool.h"
#include "exec/block_cache.h"

namespace nee {

// Per-run options (ONNX Runtime's RunOptions). One object may be shared by
// several concurrent runs; SetTerminate stops all of them.
class RunOptions {
 public:
  // Asks runs using these options to stop (from any thread). The flag stays
  // set, so later runs with these options stop at once, until cleared.
  void SetTerminate(bool terminate) { terminate_.store(terminate, std::memory_order_relaxed); }
  bool terminate() const { return terminate_.load(std::memory_order_relaxed); }
  const std::atomic<bool>* terminate_flag() const { return &terminate_; }

  int64_t timeout_ms = 0;  // 0: the session's default (SessionOptions::run_timeout_ms)
  // Run only the nodes the requested outputs need (ONNX Runtime's
  // only_execute_path_to_fetches); false: every node of the graph.
  bool only_execute_path_to_fetches = false;

 private:
  std::atomic<bool> terminate_{false};
};

// Live bytes of the heap tensors one run has made, against its limit. Shared
// by the tensors themselves (each returns its bytes when freed), so it
// outlives the run when outputs do.
//
// A run's budget may have a parent, the session's budget shared by all its
// concurrent runs: bytes are reserved in both, so either limit can stop a run.
class MemoryBudget {
 public:
  // `what` and `limit_name` are literals (a budget is made for every run: no strings to copy).
  explicit MemoryBudget(int64_t limit_bytes, std::shared_ptr<MemoryBudget> parent = nullptr,
                        const char* what = "the run's tensors", const char* limit_name = "SessionOptions memory limit")
      : limit_(limit_bytes), parent_(std::move(parent)), what_(what), limit_name_(limit_name) {}
  // Ok, or OutOfMemory naming the request, what is live and the limit.
  Status Reserve(int64_t bytes);
  void Release(int64_t bytes) {
    live_.fetch_sub(bytes, std::memory_order_relaxed);
    if (parent_) parent_->Release(bytes);
  }
  int64_t limit() const { return limit_; }
  int64_t live() const { return live_.load(std::memory_order_relaxed); }

 private:
  const int64_t limit_;  // <= 0: unlimited (still counted)
  const std::shared_ptr<MemoryBudget> parent_;  // kept alive by every run budget (outputs outlive runs)
  const char* const what_;        // for messages: "the run's tensors"
  const char* const limit_name_;  // for messages: the option that sets the limit
  std::atomic<int64_t> live_{0};
};

// Checked before every node of every graph a run executes (so also before
// every iteration of a loop body).
class RunControl {
 public:
  RunControl(const std::atomic<bool>* terminate, int64_t timeout_ms);
  // Ok while the run may go on; otherwise Cancelled saying why.
  Status Check() const;

 private:
  const std::atomic<bool>* terminate_;
  int64_t timeout_ms_;
  std::chrono::steady_clock::time_point deadline_;
};

// What every graph of one run shares: threads, stop conditions, memory budget.
struct RunEnv {
  ThreadPool* pool = nullptr;
  const RunControl* control = nullptr;  // null: never stopped early
  std::shared_ptr<MemoryBudget> memory;  // null: not counted
  class Profiler* profiler = nullptr;     // null: nodes are not timed
  // Where counted heap tensors get small blocks (the session's, shared by its
  // runs); null: each from the heap.
  std::shared_ptr<BlockCache> blocks;
};

// The default per-run memory limit: the machine's physical memory (a run that
// needs more would be killed by the system instead of failing cleanly).
int64_t DefaultRunMemoryLimit();

}  // namespace nee
