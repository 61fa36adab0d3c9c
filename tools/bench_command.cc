// `nee bench MODEL`: times a model on the inputs given (--input, --inputs-dir)
// and random values of the declared types for the rest.
//
// It creates the session (timed), runs --warmup untimed runs (the first run
// also prepares kernels: packed weights, compiled forests), then --runs timed
// runs, and prints latency percentiles, throughput, the creation time and
// the process's peak resident memory. A progress bar goes to stderr, only
// when stderr is a terminal, so piped output stays clean.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/progress_bar.h"
#include "tools/cli_common.h"

namespace nee_cli {
namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Nearest-rank percentile of sorted samples (q in (0, 1]).
double Percentile(const std::vector<double>& sorted, double q) {
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

// The process's peak resident set (VmHWM in /proc/self/status), in bytes; -1
// where the system does not say.
double PeakResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    try {
      return std::stod(line.substr(6)) * 1024.0;  // "VmHWM:   12345 kB"
    } catch (...) {
      return -1;
    }
  }
  return -1;
}

// Runs the model `count` times; the time of each run in ms.
std::vector<double> TimeRuns(const neeapi::Session& session, const Feed& feed, int64_t count, const char* phase,
                             nee::ProgressBar& progress) {
  std::vector<double> times;
  times.reserve(static_cast<size_t>(count));
  const auto view = feed.View();
  for (int64_t r = 0; r < count; ++r) {
    progress.Show(phase, r, count);
    const auto start = std::chrono::steady_clock::now();
    session.Run(feed.names, view);
    times.push_back(MsSince(start));
  }
  progress.Show(phase, count, count);
  return times;
}

// The batch the runs process: the first dim of the first input as fed (what
// --batch or --dim set, or the model fixes); 1 for a scalar or no input.
int64_t BatchOf(const Feed& feed) {
  if (feed.values.empty() || nee_value_kind(feed.values[0].get()) != NEE_VALUE_TENSOR) return 1;
  if (nee_value_rank(feed.values[0].get()) == 0) return 1;
  return nee_value_dims(feed.values[0].get())[0];
}

}  // namespace

int Bench(const Args& a) {
  neeapi::SessionOptions options;
  options.SetIntraOpThreads(a.threads).SetOptimizationLevel(a.opt_level < 0 ? 99 : a.opt_level);
  const auto create_start = std::chrono::steady_clock::now();
  neeapi::Session session(a.model, options);
  const double create_ms = MsSince(create_start);

  Args given = a;
  given.random = true;  // what --input / --inputs-dir leave out
  const Feed feed = GatherInputs(given, session);
  nee::ProgressBar progress;
  TimeRuns(session, feed, a.warmup, "warmup", progress);
  std::vector<double> times = TimeRuns(session, feed, a.runs, "timed", progress);
  progress.Clear();
  std::sort(times.begin(), times.end());
  double total_ms = 0;
  for (double t : times) total_ms += t;
  const double mean_ms = total_ms / static_cast<double>(times.size());
  const int64_t batch = BatchOf(feed);

  std::printf("model:            %s\n", a.model.c_str());
  std::printf("threads:          %s\n", a.threads > 0 ? std::to_string(a.threads).c_str() : "default");
  std::printf("inputs:          ");
  for (size_t i = 0; i < feed.names.size(); ++i)
    std::printf("%s %s %s", i ? "," : "", feed.names[i].c_str(), neeapi::Describe(feed.values[i].get()).c_str());
  std::printf("\n");
  std::printf("session creation: %.3f ms\n", create_ms);
  std::printf("runs:             %lld timed after %lld warmup\n", static_cast<long long>(a.runs),
              static_cast<long long>(a.warmup));
  std::printf("latency ms:       median %.3f  p90 %.3f  p99 %.3f  min %.3f  max %.3f  mean %.3f\n",
              Percentile(times, 0.5), Percentile(times, 0.9), Percentile(times, 0.99), times.front(), times.back(),
              mean_ms);
  const double runs_per_s = 1000.0 / mean_ms;
  std::printf("throughput:       %.2f runs/s, %.2f samples/s (batch %lld)\n", runs_per_s,
              runs_per_s * static_cast<double>(batch), static_cast<long long>(batch));
  const double peak = PeakResidentBytes();
  if (peak >= 0) std::printf("peak memory:      %s (VmHWM)\n", HumanBytes(peak).c_str());
  else std::printf("peak memory:      unavailable\n");
  return 0;
}

}  // namespace nee_cli
