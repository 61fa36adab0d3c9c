// `nee precision`: how far a model's outputs and intermediate values drift
// from a reference model's on the same inputs (docs/precision.md). Both models
// run as nee sessions; per output and per layer (every float intermediate the
// two share, in the reference's topological order) the error is summarised as
// max abs / relative error, ULP distance, cosine similarity, RMS error and
// top-1 agreement over the last axis.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "exec/session.h"

namespace nee {

struct PrecisionRequest {
  std::string model_path, reference_path;
  // Instead of reference_path: compare the model (then the reference) with
  // the variant `nee quantize` makes of it, in memory: "int8" (dynamic) or "fp16".
  std::string variant;
  // The reference (REF_MODEL, or with a variant the model itself) computed in
  // float64 where its ops allow it, its outputs rounded once to float32: how
  // far the model is from the exact answer, not from another float32 run.
  bool fp64_reference = false;
  // Inputs given as values: one entry per sample, every input of the models named.
  std::vector<std::vector<NamedValue>> samples;
  // Inputs given as files: a folder holding input_<i>.pb / input_<i>.npy (the
  // reference's graph-input order) or <name>.npy, or holding subfolders that do,
  // one sample each; NAME=FILE pairs replace that input in every sample.
  std::string inputs_dir;
  std::vector<std::pair<std::string, std::string>> input_files;
  // With neither: this many samples of random values (0: 8), floats uniform in
  // [-1, 1), integers in [0, 10); symbolic dims from `dims` (by symbol), else 1.
  int64_t random_samples = 0;
  std::map<std::string, int64_t> dims;
  uint64_t seed = 12345;
  int threads = 0;
  bool per_layer = true;
  // Gates (negative: none): the largest top-1 disagreement of any output in
  // percent (100 - agreement), the largest max abs error of any output.
  double max_top1_drop_percent = -1;
  double max_abs = -1;
};

struct PrecisionMetrics {
  int64_t elements = 0;              // element pairs compared, all samples
  int64_t nonfinite_mismatches = 0;  // pairs where one side is NaN/inf and the other differs (left out below)
  double max_abs = 0, max_rel = 0, rms = 0, cosine = 1;
  uint64_t ulp_max = 0;
  double ulp_median = 0;  // exact below 1024 ULP; above, within 1/64 of an octave
  double ref_max_abs = 0;  // the reference's largest |value| (the scale)
  int64_t top1_rows = 0, top1_agree = 0;  // top1_rows 0: not applicable
};

struct TensorComparison {
  std::string name;        // in the reference
  std::string model_name;  // in the model (differs when matched by position or suffix)
  std::string model_type, reference_type;  // element types ("float16")
  std::string compared_in;  // "float32" or "float64"
  std::string skipped;      // non-empty: why this one was not compared
  PrecisionMetrics metrics;
};

struct PrecisionReport {
  std::string model_path, reference_path;
  int64_t samples = 0;
  std::string input_source;
  std::string output_matching;  // "name" or "position"
  std::vector<TensorComparison> outputs;
  bool per_layer = false;
  std::vector<TensorComparison> layers;
  int64_t layers_unmatched = 0;  // float node outputs of the reference the model lacks
  double max_top1_drop_percent = -1, max_abs = -1;
  std::vector<std::string> gate_failures;

  Json ToJson() const;
  // The aligned tables `nee precision` prints.
  std::string Table() const;
};

Result<PrecisionReport> ComparePrecision(const PrecisionRequest& request);

// The metrics of one pair of tensors from one sample, added to `m` (tests and
// ComparePrecision); `model` and `reference` must hold the same number of
// float elements. Finish gives the metrics once all samples are in.
class PrecisionAccumulator {
 public:
  Status Add(const Tensor& model, const Tensor& reference);
  PrecisionMetrics Finish() const;

 private:
  PrecisionMetrics m_;
  int64_t finite_pairs_ = 0;
  double sum_sq_ = 0, dot_ = 0, norm_a_ = 0, norm_b_ = 0;
  std::vector<int64_t> ulp_histogram_;
};

}  // namespace nee
