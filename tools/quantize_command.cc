// `nee quantize MODEL -o OUT.onnx --mode dynamic|fp16|bf16 [--exclude NODE]... [--per-channel]
// [--reduce-range]`, `--mode static --calibration DIR [--calibrator minmax|percentile|entropy]
// [--percentile P] [--per-channel] [--symmetric-activations]` (QDQ, exec/calibrate.h), `--mode int4
// [--block-size 32|64|128]` (MatMulNBits, weights only): the model rewritten to int8 (dynamic: weights quantized
// once, activations at run time), float16 / bfloat16 or int4 weights by src/opt/quantize.h, written as
// a standard ONNX model ONNX Runtime also runs, with a lineage record
// ("quantize"). Prints what was rewritten, what was kept and why, and the
// weight bytes before and after. A bad mode or an --exclude naming no node
// is an error (exit status 1) and nothing is written.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tools/cli_common.h"

namespace nee_cli {

int Quantize(int argc, char** argv) {
  if (argc < 3) throw UsageError{"nee quantize needs a model path"};
  const std::string in = argv[2];
  if (in.rfind("-", 0) == 0) throw UsageError{"expected a model path after 'quantize', got '" + in + "'"};
  std::string out, mode, calibration, calibrator = "minmax";
  double percentile = 99.999;
  int64_t block_size = 0;  // int4; 0: the default (32)
  std::vector<std::string> exclude;
  int32_t flags = 0;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError{arg + " needs a value"};
      return argv[++i];
    };
    if (arg == "--mode") mode = next();
    else if (arg == "-o" || arg == "--output") out = next();
    else if (arg == "--exclude") exclude.push_back(next());
    else if (arg == "--per-channel") flags |= NEE_QUANTIZE_PER_CHANNEL;
    else if (arg == "--reduce-range") flags |= NEE_QUANTIZE_REDUCE_RANGE;
    else if (arg == "--calibration") calibration = next();
    else if (arg == "--calibrator") calibrator = next();
    else if (arg == "--percentile") {
      const std::string v = next();
      char* end = nullptr;
      percentile = std::strtod(v.c_str(), &end);
      if (v.empty() || *end) throw UsageError{"--percentile needs a number, got '" + v + "'"};
    } else if (arg == "--block-size") {
      const std::string v = next();
      char* end = nullptr;
      block_size = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || block_size <= 0) throw UsageError{"--block-size needs a positive integer, got '" + v + "'"};
    } else if (arg == "--symmetric-activations") flags |= NEE_QUANTIZE_SYMMETRIC_ACTIVATIONS;
    else throw UsageError{"option '" + arg + "' does not apply to nee quantize"};
  }
  if (mode.empty()) throw UsageError{"quantize needs --mode dynamic|static|fp16|bf16|int4"};
  if (out.empty()) throw UsageError{"quantize needs -o OUT.onnx"};
  if (mode == "static" && calibration.empty()) throw UsageError{"--mode static needs --calibration DIR"};
  if (mode != "static" && (!calibration.empty() || (flags & NEE_QUANTIZE_SYMMETRIC_ACTIVATIONS)))
    throw UsageError{"--calibration and --symmetric-activations apply to --mode static only"};
  std::vector<const char*> names;
  for (const std::string& name : exclude) names.push_back(name.c_str());
  std::string report(1 << 16, '\0');
  size_t length = 0;
  if (mode != "int4" && block_size != 0) throw UsageError{"--block-size applies to --mode int4 only"};
  if (mode == "int4") {
    if (flags) throw UsageError{"--per-channel and --reduce-range apply to --mode dynamic/static only"};
    neeapi::Check(nee_model_quantize_int4(in.c_str(), out.c_str(), block_size ? block_size : 32, names.data(),
                                          names.size(), report.data(), report.size(), &length));
  } else if (mode == "static") {
    neeapi::Check(nee_model_quantize_static(in.c_str(), out.c_str(), calibration.c_str(), calibrator.c_str(),
                                            percentile, names.data(), names.size(), flags | NEE_QUANTIZE_PROGRESS,
                                            report.data(), report.size(), &length));
  } else {
    neeapi::Check(nee_model_quantize(in.c_str(), out.c_str(), mode.c_str(), names.data(), names.size(), flags,
                                     report.data(), report.size(), &length));
  }
  report.resize(std::min(length, report.size() - 1));
  std::printf("%s", report.c_str());
  std::printf("written to %s (lineage record appended)\n", out.c_str());
  return 0;
}

}  // namespace nee_cli
