// Calibration for static quantization (`nee quantize --mode static`,
// opt/quantize.h): the fp32 model run by a nee session on every sample of a
// folder, recording each float activation the QDQ rewrite will quantize, and
// a range per activation computed by a calibrator:
//   minmax      the smallest and largest value over all samples;
//   percentile  the p-th percentile of x and the (100-p)-th as the range's
//               ends (with symmetric activations: [-t, t], t the p-th
//               percentile of |x|), read from a 16384-bin histogram per
//               tensor over its min/max range (a second pass over the
//               samples), so no tensor's values are held;
//   entropy     the clipping threshold t that minimizes the KL divergence
//               between a 2048-bin histogram of |x| and its quantized form
//               (TensorRT's method; EntropyThreshold in calibrate.cc
//               describes it), the range [max(min, -t), min(max, t)]
//               ([-t, t] with symmetric activations).
// Non-finite values are left out of every statistic.
//
// Samples: each subfolder of the calibration folder (in name order) is one
// sample; it holds, for each graph input i named NAME, NAME.npy, NAME.pb,
// input_<i>.pb or input_<i>.npy (the first that exists; .pb files hold a
// TensorProto, as `nee run --inputs-dir` reads them). Missing inputs, bad
// files and inputs of the wrong type or shape are errors naming the sample
// and the input.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "exec/session.h"
#include "ir/graph.h"
#include "opt/quantize.h"

namespace nee {

enum class CalibrationMethod { kMinMax, kPercentile, kEntropy };

// "minmax" / "percentile" / "entropy"; an InvalidArgument listing them otherwise.
Result<CalibrationMethod> ParseCalibrationMethod(const std::string& text);
const char* CalibrationMethodName(CalibrationMethod method);

struct CalibrationOptions {
  std::string dir;
  CalibrationMethod method = CalibrationMethod::kMinMax;
  double percentile = 99.999;  // in (50, 100]
  bool symmetric = false;      // percentile of |x|: a range [-t, t]
  bool progress = false;       // a progress bar on stderr (when it is a terminal)
  int threads = 0;             // the session's intra-op threads (0: all cores)
};

struct CalibrationResult {
  std::map<std::string, QuantizeOptions::Range> ranges;
  size_t samples = 0;
};

// The sample folders of `dir`, sorted; an error when `dir` is missing, not a
// folder or holds no subfolder.
Result<std::vector<std::string>> ListCalibrationSamples(const std::string& dir);

// The inputs of one sample for the session's feedable inputs.
Result<std::vector<NamedValue>> LoadCalibrationSample(const std::string& sample_dir, const std::vector<ValueInfo>& inputs);

// Runs `model` (functions expanded) on every sample and returns the range of
// each of `tensors` (graph inputs or node outputs of its main graph).
Result<CalibrationResult> Calibrate(Model model, const std::vector<std::string>& tensors,
                                    const CalibrationOptions& options);

// `nee quantize --mode static`: reads `in_path`, calibrates the activations
// quant::StaticCalibrationTensors lists, then quantizes as QuantizeModelFile
// does with those ranges (options.mode must be kStatic). Writes nothing on error.
Result<QuantizeReport> QuantizeStaticFile(const std::string& in_path, const std::string& out_path,
                                          QuantizeOptions options, const CalibrationOptions& calibration);

}  // namespace nee
