// `nee profile MODEL`: runs a model with profiling on and prints where the
// time went, per operator type (share of the node time, calls, mean), then
// writes the Chrome trace (the format ONNX Runtime's profiler writes: session
// phases and one event per node run; open it in chrome://tracing or Perfetto).
//
// Inputs are the ones given (--input, --inputs-dir), random values of the
// declared types for the rest. Every one of the --runs runs is profiled; the
// first also prepares kernels (packed weights), as in ONNX Runtime's profile.
#include <chrono>
#include <cstdio>
#include <string>

#include "tools/cli_common.h"

namespace nee_cli {

int Profile(const Args& a) {
  neeapi::SessionOptions options;
  options.SetIntraOpThreads(a.threads).SetOptimizationLevel(a.opt_level < 0 ? 99 : a.opt_level);
  options.SetRunTimeoutMs(a.timeout_ms).SetRunMemoryLimit(a.memory_limit);
  options.SetProfiling(a.profile_prefix.empty() ? "nee_profile" : a.profile_prefix);
  for (const auto& [limit, value] : a.limits) options.SetLimit(limit, value);
  neeapi::Session session(a.model, options);
  Args with_random = a;
  with_random.random = true;
  const Feed feed = GatherInputs(with_random, session);
  const auto view = feed.View();
  const auto start = std::chrono::steady_clock::now();
  for (int64_t r = 0; r < a.runs; ++r) session.Run(feed.names, view);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("model:   %s\n", a.model.c_str());
  std::printf("runs:    %lld (%.3f ms a run with profiling on; the first also prepares kernels)\n",
              static_cast<long long>(a.runs), ms / static_cast<double>(a.runs));
  std::printf("time per operator type (over all runs):\n%s", session.ProfileSummary().c_str());
  std::printf("profile written to %s\n", session.EndProfiling().c_str());
  return 0;
}

}  // namespace nee_cli
