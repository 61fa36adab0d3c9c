// `nee precision MODEL --against REF_MODEL` (or `--variant int8|fp16|bf16|int4`: the
// model against the variant nee quantize makes of it): runs both models on the
// same inputs and prints how far the model's outputs, and every float
// intermediate value the two share, drift from the reference's (src/exec/precision.h,
// docs/precision.md). With --max-top1-drop / --max-abs it is a CI gate: exit
// status 4 when one fails.
#include <cstdio>
#include <fstream>
#include <string>

#include "exec/precision.h"
#include "tools/cli_common.h"

namespace nee_cli {

constexpr int kExitGateFailed = 4;

namespace {

double ParseNumber(const std::string& flag, std::string text) {
  if (!text.empty() && text.back() == '%') text.pop_back();
  try {
    size_t used = 0;
    double v = std::stod(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw UsageError{flag + " " + text + ": expected a number >= 0"};
}

std::pair<std::string, std::string> SplitNameValue(const std::string& flag, const std::string& pair) {
  size_t eq = pair.find('=');
  if (eq == std::string::npos || eq == 0) throw UsageError{flag + " " + pair + ": expected NAME=VALUE"};
  return {pair.substr(0, eq), pair.substr(eq + 1)};
}

}  // namespace

int Precision(int argc, char** argv) {
  if (argc < 3) throw UsageError{"nee precision needs a model path"};
  nee::PrecisionRequest req;
  req.model_path = argv[2];
  if (req.model_path.rfind("-", 0) == 0)
    throw UsageError{"expected a model path after 'precision', got '" + req.model_path + "'"};
  std::string json_path;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError{arg + " needs a value"};
      return argv[++i];
    };
    if (arg == "--against") req.reference_path = next();
    else if (arg == "--variant") req.variant = next();
    else if (arg == "--inputs") req.inputs_dir = next();
    else if (arg == "--input") req.input_files.push_back(SplitNameValue(arg, next()));
    else if (arg == "--random") req.random_samples = ParseCount(arg, next(), 1, 1'000'000);
    else if (arg == "--dim") {
      auto [symbol, size] = SplitNameValue(arg, next());
      req.dims[symbol] = ParseCount(arg, size, 0, int64_t{1} << 40);
    } else if (arg == "--max-top1-drop") req.max_top1_drop_percent = ParseNumber(arg, next());
    else if (arg == "--max-abs") req.max_abs = ParseNumber(arg, next());
    else if (arg == "--json") json_path = next();
    else if (arg == "--threads") req.threads = static_cast<int>(ParseCount(arg, next(), 0, 4096));
    else if (arg == "--seed") req.seed = static_cast<uint64_t>(ParseCount(arg, next(), 0, INT64_MAX));
    else if (arg == "--no-layers") req.per_layer = false;
    else if (arg == "--fp64") req.fp64_reference = true;
    else throw UsageError{"option '" + arg + "' does not apply to nee precision"};
  }
  if (req.reference_path.empty() == req.variant.empty())
    throw UsageError{"precision needs --against REF_MODEL or --variant int8|fp16|bf16|int4 (one of them)"};
  if (req.random_samples > 0 && (!req.inputs_dir.empty() || !req.input_files.empty()))
    throw UsageError{"--random and --inputs/--input exclude each other"};
  std::ofstream out;
  if (!json_path.empty()) {  // opened first: an unwritable path fails before the models run
    out.open(json_path, std::ios::binary);
    if (!out) throw neeapi::Error(NEE_STATUS_IO_ERROR, "--json: cannot write '" + json_path + "'");
  }
  nee::Result<nee::PrecisionReport> report = nee::ComparePrecision(req);
  ThrowIfError(report.status());
  std::printf("%s", report->Table().c_str());
  if (!json_path.empty()) {
    out << report->ToJson().Serialize(2) << "\n";
    out.close();
    if (!out) throw neeapi::Error(NEE_STATUS_IO_ERROR, "--json: cannot write '" + json_path + "'");
    std::printf("\nwritten to %s\n", json_path.c_str());
  }
  if (!report->gate_failures.empty()) {
    std::fflush(stdout);
    for (const auto& f : report->gate_failures) std::fprintf(stderr, "nee: precision gate failed: %s\n", f.c_str());
    return kExitGateFailed;
  }
  if (req.max_top1_drop_percent >= 0 || req.max_abs >= 0) std::printf("\nprecision gates passed\n");
  return 0;
}

}  // namespace nee_cli
