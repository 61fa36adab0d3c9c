// Per-node timings of a session's runs: what `SessionOptions::profiling`
// turns on. Written out as a Chrome trace (chrome://tracing, Perfetto: one
// complete event per node run, on the thread that ran it) and summarised per
// op type, which is how to find the biggest bucket before optimizing.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "ir/graph.h"

namespace nee {

class Profiler {
 public:
  Profiler();

  // Microseconds since the profiler started (the trace's time base).
  int64_t NowUs() const;
  // One node run: `kernel` says which kernel ran it ("optimized"/"reference").
  void Record(const Node& node, const char* kernel, int64_t start_us, int64_t duration_us);

  // The trace as Chrome's JSON array format.
  std::string ChromeTraceJson() const;
  // A table of op types by total time: calls, total ms, share, mean us.
  std::string Summary() const;
  // Writes the trace to `path`.
  Status WriteTrace(const std::string& path) const;
  int64_t start_time_ns() const { return start_time_ns_; }

 private:
  struct Event {
    std::string name;
    std::string op;
    const char* kernel;
    int64_t start_us;
    int64_t duration_us;
    uint64_t thread;
  };
  // A long-running profiled session keeps at most this many events (the
  // first ones); the summary still counts every call.
  static constexpr size_t kMaxEvents = 1 << 20;

  std::chrono::steady_clock::time_point origin_;
  int64_t start_time_ns_;  // wall clock at start, as ONNX Runtime reports it
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
