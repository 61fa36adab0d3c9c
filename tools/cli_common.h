// What the `nee` subcommands share (nee_main.cc, bench_command.cc, meta_command.cc, bom_command.cc): the parsed
// arguments, usage errors and random or file inputs.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "nee/nee.hpp"

namespace neeapi = nee::api;

namespace nee_cli {

// A mistake in the command line: printed with the usage text, exit status 2.
struct UsageError {
  std::string message;
};

struct Args {
  std::string command, model;
  std::vector<std::pair<std::string, std::string>> inputs, expects;
  std::map<std::string, int64_t> dims;
  std::string inputs_dir, output_dir, output_format = "npy", profile_prefix, output_model;
  bool random = false, plan = false;
  bool sandbox = false;  // nee run --sandbox: load and run in a confined child process (sandbox_command.cc)
  int threads = 0;
  int opt_level = -1;  // not given: run optimizes fully (99), inspect shows the model as written (0)
  int64_t timeout_ms = 0;
  int64_t memory_limit = -1;
  int repeat = 0;
  std::vector<std::pair<int32_t, int64_t>> limits;  // (nee_limit_t, value) from --limit
  std::vector<std::string> custom_ops;  // --custom-ops LIB (repeatable): custom-op libraries (nee/custom_op.h)
  // nee bench
  int64_t runs = 20, warmup = 3;
  int64_t batch = 0;  // 0: not given (symbolic first dims are 1, or what --dim says)
};

// An integer flag value in [min, max], or a UsageError naming the flag.
int64_t ParseCount(const std::string& flag, const std::string& text, int64_t min, int64_t max);

std::string ShapeText(const neeapi::ValueInfo& vi);
std::string HumanBytes(double bytes);

// Random values of the input's declared type and shape: symbolic dims from
// `dims` (by symbol), else `batch` for a symbolic first dim when batch > 0,
// else 1.
neeapi::ValuePtr RandomInput(const neeapi::ValueInfo& vi, const std::map<std::string, int64_t>& dims,
                             std::mt19937& rng, int64_t batch = 0);

struct Feed {
  std::vector<std::string> names;
  std::vector<neeapi::ValuePtr> values;
  std::vector<const nee_value_t*> View() const {
    std::vector<const nee_value_t*> v;
    for (const auto& p : values) v.push_back(p.get());
    return v;
  }
};

// The inputs `nee run` was given (--input, --inputs-dir), the rest random
// when --random (or --plan) is set.
Feed GatherInputs(const Args& a, const neeapi::Session& session);

// What `nee run` computed: the outputs in graph-output order with their names,
// the first run's time and lines to print about further runs.
struct RunOutcome {
  std::vector<std::string> names;
  std::vector<neeapi::ValuePtr> outputs;
  double ms = 0;
  std::string notes;
};

// nee run's work: the session, its inputs and the runs; `before_run` (if
// set) is called once the model and inputs are read, before the first run.
RunOutcome ComputeRun(const Args& a, const std::function<void()>& before_run);
// The same in a child process under seccomp and resource limits
// (sandbox_command.cc); errors come back as neeapi::Error.
RunOutcome ComputeRunSandboxed(const Args& a);

// nee bench (bench_command.cc).
int Bench(const Args& a);
// nee ops (ops_command.cc) and nee check (check_command.cc) parse their own
// arguments (argv[1] is the verb).
int Ops(int argc, char** argv);
int Check(int argc, char** argv);

// nee meta and nee bom parse their own arguments (meta_command.cc,
// bom_command.cc); PrintLineage is `nee inspect`'s lineage section.
// A library status as the neeapi::Error the commands throw (same code and message).
void ThrowIfError(const nee::Status& status);
int Meta(int argc, char** argv);
int Bom(int argc, char** argv);
void PrintLineage(const std::vector<std::pair<std::string, std::string>>& metadata_props);
// nee convert MODEL --opset N -o OUT (convert_command.cc).
int Convert(int argc, char** argv);
// nee quantize MODEL -o OUT --mode dynamic|fp16 (quantize_command.cc).
int Quantize(int argc, char** argv);
// nee precision MODEL --against REF (precision_command.cc).
int Precision(int argc, char** argv);
// nee profile (profile_command.cc).
int Profile(const Args& a);

}  // namespace nee_cli
