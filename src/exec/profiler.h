// What `SessionOptions::enable_profiling` records: the phases of creating the
// session and every node of every run, in ONNX Runtime's profile format — a
// Chrome trace (chrome://tracing, Perfetto) of complete events ("ph":"X")
// with cat/name/pid/tid/ts/dur/args: "Session" events for loading, checking,
// optimizing and planning the model and for each run ("model_run"), "Node"
// events named "<node>_kernel_time" whose args give the op type, the provider,
// the input and output types and shapes, the thread and the kernel (optimized
// or reference), and "<node>_kernel_prepare" for the time a node's first run
// spent preparing its kernel (packing weights). Also summarised per op type,
// which is how to find the biggest bucket before optimizing.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "ir/graph.h"
#include "ir/value.h"

namespace nee {

class Profiler {
 public:
  using Clock = std::chrono::steady_clock;
  // `origin` is time 0 of the trace (when the session started being made).
  explicit Profiler(Clock::time_point origin = Clock::now());

  // Microseconds from the trace's origin to `t` (default: now).
  int64_t Us(Clock::time_point t) const;
  int64_t NowUs() const { return Us(Clock::now()); }

  // A phase of the session's life (cat "Session"): "model_loading_uri",
  // "session_initialization", "model_run", ...
  void RecordSession(const std::string& name, int64_t start_us, int64_t duration_us);
  // One node run: `index` its place in the plan, `kernel` which kernel ran it
  // ("optimized"/"reference"), the values it read and made. `prepare_us` of
  // the call went into preparing the kernel (weights packed on its first
  // run, PreparedCache): recorded as its own "<node>_kernel_prepare" event
  // at the start of the call, and left out of the kernel time.
  void RecordNode(const Node& node, size_t index, const char* kernel, int64_t start_us, int64_t duration_us,
                  const std::vector<const Value*>& inputs, const std::vector<Value>& outputs,
                  int64_t prepare_us = 0);

  // The trace as Chrome's JSON array format.
  std::string ChromeTraceJson() const;
  // A table of op types by total time: calls, total ms, share, mean us.
  std::string Summary() const;
  // Writes the trace to `path`.
  Status WriteTrace(const std::string& path) const;
  int64_t start_time_ns() const { return start_time_ns_; }

 private:
  struct Event {
    const char* category;
    std::string name;
    int64_t start_us;
    int64_t duration_us;
    int64_t thread;
    std::string args;  // the JSON object's members, without braces
  };
  // A long-running profiled session keeps at most this many events (the
  // first ones); the summary still counts every call.
  static constexpr size_t kMaxEvents = 1 << 20;
  // The summary's row for kernel preparation (all ops together).
  static constexpr const char* kPrepareTotal = "(kernel prepare)";
  void Add(Event event);
  void AddToTotal(const std::string& op, int64_t us);  // one call of `op` that took `us`

  Clock::time_point origin_;
  int64_t start_time_ns_;  // wall clock at the origin, as ONNX Runtime reports it
  int64_t pid_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  struct OpTotal {
    std::string op;
    int64_t calls = 0;
    int64_t total_us = 0;
  };
  std::vector<OpTotal> totals_;
};

}  // namespace nee
