// Calibration for static quantization (exec/calibrate.h).
#include "exec/calibrate.h"


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <system_error>
#include <unordered_set>

#include "base/mapped_file.h"
#include "base/progress_bar.h"
#include "format/npy.h"
#include "format/onnx_reader.h"

namespace nee {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kPercentileBins = 16384;
constexpr int64_t kEntropyBins = 2048;

struct TensorStats {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  uint64_t count = 0;  // finite values
  // Second pass (percentile): counts over [lo, hi].
  double lo = 0, hi = 0;
  std::vector<uint64_t> bins;
};

void AddMinMax(const Tensor& t, TensorStats& s) {
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const float v = p[i];
    if (!std::isfinite(v)) continue;
    s.min = std::min(s.min, static_cast<double>(v));
    s.max = std::max(s.max, static_cast<double>(v));
    ++s.count;
  }
}

void AddHistogram(const Tensor& t, bool absolute, TensorStats& s) {
  const float* p = t.data<float>();
  const int64_t bins = static_cast<int64_t>(s.bins.size());
  const double width = (s.hi - s.lo) / static_cast<double>(bins);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    double v = p[i];
    if (!std::isfinite(v)) continue;
    if (absolute) v = std::fabs(v);
    int64_t b = width > 0 ? static_cast<int64_t>((v - s.lo) / width) : 0;
    b = std::min(std::max<int64_t>(b, 0), bins - 1);
    ++s.bins[static_cast<size_t>(b)];
  }
}

// The p-th percentile as numpy's np.percentile (linear) defines it: the
// values of sorted ranks floor(r) and floor(r) + 1, r = p/100 * (n - 1),
// interpolated at r's fraction. Each of the two is read from the histogram
// as the centre of the bin that holds that rank, so the result is within
// half a bin width of numpy's.
double HistogramPercentile(const TensorStats& s, double p) {
  const double width = (s.hi - s.lo) / static_cast<double>(kPercentileBins);
  if (s.count == 0) return 0;
  if (width <= 0) return s.lo;
  const double rank = p / 100.0 * static_cast<double>(s.count - 1);
  const uint64_t below = static_cast<uint64_t>(std::floor(rank));
  const double frac = rank - static_cast<double>(below);
  // The value of sorted rank k (0-based): the centre of its bin.
  auto at = [&](uint64_t k) {
    uint64_t before = 0;
    for (int64_t b = 0; b < kPercentileBins; ++b) {
      before += s.bins[static_cast<size_t>(b)];
      if (before > k) return s.lo + width * (static_cast<double>(b) + 0.5);
    }
    return s.hi;
  };
  const double v0 = at(below);
  if (frac <= 0 || below + 1 >= s.count) return v0;
  return v0 + frac * (at(below + 1) - v0);
}

// The entropy calibrator's threshold (TensorRT's method, as in Migacz, "8-bit
// Inference with TensorRT", GTC 2017), from a 2048-bin histogram of |x| over
// [0, max|x|]: for each candidate threshold i (in bins, from `levels` to
// 2048),
//   P = the first i bins, the counts of the bins beyond added to bin i - 1
//       (values past the threshold are clipped to it);
//   Q = the first i bins as they are (without the clipped values) merged
//       into `levels` groups of consecutive bins (the last group takes the
//       remainder), each group's total spread evenly over the group's
//       non-empty bins (empty bins stay empty);
//   both normalized to sum 1; KL(P || Q) = sum over P > 0 of P log(P / Q).
//       Leaving the clipped values out of Q is what makes clipping cost
//       (with them in, i = levels gives Q = P and always wins); a candidate
//       whose last bin is empty but receives clipped values (P > 0, Q = 0)
//       is infinitely far and never chosen.
// The threshold is the end of the bin of the i with the least divergence
// (the first of equals): t = i * width. `levels` is the number of quantized
// values on the side of 0 the data covers: 128 for signed data (uint8's 255
// steps over [-t, t]), 255 for data that is never negative.
double EntropyThreshold(const TensorStats& s, int64_t levels) {
  const int64_t bins = static_cast<int64_t>(s.bins.size());
  const double width = (s.hi - s.lo) / static_cast<double>(bins);
  if (s.count == 0 || width <= 0) return s.hi;
  if (levels >= bins) return s.hi;
  double best = std::numeric_limits<double>::infinity();
  int64_t best_i = bins;
  std::vector<double> p, q;
  for (int64_t i = levels; i <= bins; ++i) {
    p.assign(s.bins.begin(), s.bins.begin() + i);
    double outliers = 0;
    for (int64_t b = i; b < bins; ++b) outliers += static_cast<double>(s.bins[static_cast<size_t>(b)]);
    p[static_cast<size_t>(i - 1)] += outliers;
    q.assign(static_cast<size_t>(i), 0.0);
    const int64_t per = i / levels;  // bins per group; the last group takes the rest
    for (int64_t g = 0; g < levels; ++g) {
      const int64_t start = g * per, end = g == levels - 1 ? i : start + per;
      double total = 0;
      int64_t nonzero = 0;
      for (int64_t b = start; b < end; ++b) {
        const double n = static_cast<double>(s.bins[static_cast<size_t>(b)]);
        total += n;
        if (n > 0) ++nonzero;
      }
      for (int64_t b = start; b < end && nonzero > 0; ++b)
        if (s.bins[static_cast<size_t>(b)] > 0) q[static_cast<size_t>(b)] = total / static_cast<double>(nonzero);
    }
    double p_sum = 0, q_sum = 0;
    for (int64_t b = 0; b < i; ++b) {
      p_sum += p[static_cast<size_t>(b)];
      q_sum += q[static_cast<size_t>(b)];
    }
    if (p_sum <= 0 || q_sum <= 0) continue;
    double kl = 0;
    bool finite = true;
    for (int64_t b = 0; b < i && finite; ++b) {
      const double pb = p[static_cast<size_t>(b)] / p_sum, qb = q[static_cast<size_t>(b)] / q_sum;
      if (pb > 0 && qb <= 0) finite = false;  // clipped values in an empty bin: infinitely far
      else if (pb > 0) kl += pb * std::log(pb / qb);
    }
    if (!finite) continue;
    if (kl < best) {
      best = kl;
      best_i = i;
    }
  }
  return s.lo + width * static_cast<double>(best_i);
}

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

Result<CalibrationMethod> ParseCalibrationMethod(const std::string& text) {
  if (text == "minmax") return CalibrationMethod::kMinMax;
  if (text == "percentile") return CalibrationMethod::kPercentile;
  if (text == "entropy") return CalibrationMethod::kEntropy;
  return InvalidArgument("unknown calibrator '" + text + "' (expected minmax, percentile or entropy)");
}

const char* CalibrationMethodName(CalibrationMethod method) {
  switch (method) {
    case CalibrationMethod::kMinMax:
      return "minmax";
    case CalibrationMethod::kPercentile:
      return "percentile";
    case CalibrationMethod::kEntropy:
      break;
  }
  return "entropy";
}

Result<std::vector<std::string>> ListCalibrationSamples(const std::string& dir) {
  std::error_code ec;
  if (dir.empty()) return InvalidArgument("static quantization needs a calibration folder (--calibration DIR)");
  if (!fs::exists(dir, ec)) return InvalidArgument("calibration folder " + Quoted(dir) + " does not exist");
  if (!fs::is_directory(dir, ec)) return InvalidArgument("calibration path " + Quoted(dir) + " is not a folder");
  std::vector<std::string> samples;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) samples.push_back(it->path().string());
  if (ec) return IoError("cannot list calibration folder " + Quoted(dir) + ": " + ec.message());
  if (samples.empty())
    return InvalidArgument("calibration folder " + Quoted(dir) +
                           " holds no sample folders (expected DIR/<sample>/<input name>.npy or "
                           "DIR/<sample>/input_<i>.pb)");
  std::sort(samples.begin(), samples.end());
  return samples;
}

Result<std::vector<NamedValue>> LoadCalibrationSample(const std::string& sample_dir,
                                                      const std::vector<ValueInfo>& inputs) {
  const std::string sample = fs::path(sample_dir).filename().string();
  std::vector<NamedValue> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& name = inputs[i].name;
    const std::string index = std::to_string(i);
    const fs::path base(sample_dir);
    fs::path found;
    std::error_code ec;
    // A name with a path separator cannot name a file; only input_<i> then.
    const bool plain = name.find('/') == std::string::npos && name != "." && name != "..";
    std::vector<fs::path> candidates;
    if (plain) {
      candidates.push_back(base / (name + ".npy"));
      candidates.push_back(base / (name + ".pb"));
    }
    candidates.push_back(base / ("input_" + index + ".pb"));
    candidates.push_back(base / ("input_" + index + ".npy"));
    for (const fs::path& p : candidates)
      if (fs::is_regular_file(p, ec)) {
        found = p;
        break;
      }
    const std::string where = "calibration sample " + Quoted(sample) + ": input " + Quoted(name);
    if (found.empty())
      return InvalidArgument(where + " is missing (expected " + (plain ? name + ".npy, " + name + ".pb, " : "") +
                             "input_" + index + ".pb or input_" + index + ".npy in " + sample_dir + ")");
    Result<Tensor> tensor = InvalidArgument("unread");
    if (found.extension() == ".npy") {
      tensor = ReadNpyFile(found.string());
    } else {
      Result<std::shared_ptr<MappedFile>> bytes = MappedFile::Open(found.string());
      if (!bytes.ok()) return Status(bytes.status().code(), where + ": " + bytes.status().message());
      tensor = ReadTensorProto(*bytes);
    }
    if (!tensor.ok())
      return Status(tensor.status().code(), where + ": " + found.string() + ": " + tensor.status().message());
    feeds.push_back(NamedValue{name, Value(std::move(*tensor))});
  }
  return feeds;
}

Result<CalibrationResult> Calibrate(Model model, const std::vector<std::string>& tensors,
                                    const CalibrationOptions& options) {
  if (options.method == CalibrationMethod::kPercentile &&
      !(options.percentile > 50.0 && options.percentile <= 100.0))
    return InvalidArgument("--percentile must be in (50, 100], got " + std::to_string(options.percentile));
  NEE_ASSIGN_OR_RETURN(std::vector<std::string> samples, ListCalibrationSamples(options.dir));
  // Intermediate values become extra graph outputs of this copy (a graph
  // output keeps its name through every rewrite); graph inputs are read
  // from the feeds.
  std::unordered_set<std::string> graph_inputs, graph_outputs;
  for (const ValueInfo& vi : model.graph.inputs) graph_inputs.insert(vi.name);
  for (const ValueInfo& vi : model.graph.outputs) graph_outputs.insert(vi.name);
  std::vector<std::string> fetched;  // node outputs, fetched by name
  for (const std::string& t : tensors) {
    if (graph_inputs.count(t)) continue;
    fetched.push_back(t);
    if (!graph_outputs.count(t)) model.graph.outputs.push_back(ValueInfo{t, TypeInfo::Tensor(DataType::kFloat), "", {}});
  }
  SessionOptions session_options;
  session_options.intra_op_num_threads = options.threads;
  Result<std::unique_ptr<Session>> made = Session::Create(std::move(model), session_options);
  if (!made.ok())
    return Status(made.status().code(), "calibration: the model with its activations as outputs does not load: " +
                                            made.status().message());
  const Session& session = **made;

  std::map<std::string, TensorStats> stats;
  for (const std::string& t : tensors) stats[t];
  const bool entropy = options.method == CalibrationMethod::kEntropy;
  const bool histogram = options.method != CalibrationMethod::kMinMax;
  const bool absolute = options.symmetric || entropy;  // histograms of |x|
  const int passes = histogram ? 2 : 1;
  const int64_t total = static_cast<int64_t>(samples.size()) * passes;
  ProgressBar progress(options.progress);
  int64_t done = 0;
  for (int pass = 0; pass < passes; ++pass) {
    if (pass == 1) {  // the histograms' extents from the first pass
      for (auto& [name, s] : stats) {
        s.bins.assign(static_cast<size_t>(entropy ? kEntropyBins : kPercentileBins), 0);
        if (s.count == 0) continue;
        if (absolute) {
          s.lo = 0;
          s.hi = std::max(std::fabs(s.min), std::fabs(s.max));
        } else {
          s.lo = s.min;
          s.hi = s.max;
        }
      }
    }
    const char* phase = pass == 0 ? (histogram ? "calibration (min/max)" : "calibration") : "calibration (histograms)";
    for (const std::string& dir : samples) {
      progress.Show(phase, done, total);
      const std::string sample = fs::path(dir).filename().string();
      NEE_ASSIGN_OR_RETURN(std::vector<NamedValue> feeds, LoadCalibrationSample(dir, session.inputs()));
      Result<std::vector<Value>> outs = session.Run(feeds, fetched);
      if (!outs.ok())
        return Status(outs.status().code(), "calibration sample " + Quoted(sample) + ": " + outs.status().message());
      auto record = [&](const std::string& name, const Value& v) -> Status {
        if (!v.is_tensor() || v.tensor().dtype() != DataType::kFloat)
          return InvalidArgument("calibration sample " + Quoted(sample) + ": " + Quoted(name) +
                                 " is not a float32 tensor");
        TensorStats& s = stats[name];
        if (pass == 0) AddMinMax(v.tensor(), s);
        else if (s.count > 0) AddHistogram(v.tensor(), absolute, s);
        return Status::Ok();
      };
      for (size_t i = 0; i < fetched.size(); ++i) NEE_RETURN_IF_ERROR(record(fetched[i], (*outs)[i]));
      for (const NamedValue& f : feeds)
        if (stats.count(f.name)) NEE_RETURN_IF_ERROR(record(f.name, f.value));
      ++done;
    }
  }
  progress.Show("calibration", total, total);

  CalibrationResult result;
  result.samples = samples.size();
  for (const auto& [name, s] : stats) {
    QuantizeOptions::Range r;
    if (s.count == 0) {
      r.min = r.max = 0;
    } else if (!histogram) {
      r.min = static_cast<float>(s.min);
      r.max = static_cast<float>(s.max);
    } else if (entropy) {
      // Clipped at the threshold on each side the data reaches (a never
      // negative tensor keeps 0 as its low end); symmetric: [-t, t].
      const double t = EntropyThreshold(s, s.min >= 0 ? 255 : 128);
      r.min = static_cast<float>(options.symmetric ? -t : std::max(s.min, -t));
      r.max = static_cast<float>(options.symmetric ? t : std::min(s.max, t));
    } else if (options.symmetric) {
      const double t = HistogramPercentile(s, options.percentile);
      r.min = static_cast<float>(-t);
      r.max = static_cast<float>(t);
    } else {
      r.min = static_cast<float>(HistogramPercentile(s, 100.0 - options.percentile));
      r.max = static_cast<float>(HistogramPercentile(s, options.percentile));
    }
    result.ranges[name] = r;
  }
  return result;
}

Result<QuantizeReport> QuantizeStaticFile(const std::string& in_path, const std::string& out_path,
                                          QuantizeOptions options, const CalibrationOptions& calibration) {
  if (options.mode != QuantizeMode::kStatic) return InvalidArgument("QuantizeStaticFile: the mode must be static");
  NEE_ASSIGN_OR_RETURN(Model model, ReadModelFile(in_path));
  NEE_ASSIGN_OR_RETURN(std::vector<std::string> tensors, quant::StaticCalibrationTensors(model, options));
  CalibrationOptions cal = calibration;
  cal.symmetric = options.symmetric_activations;
  NEE_ASSIGN_OR_RETURN(CalibrationResult calibrated, Calibrate(std::move(model), tensors, cal));
  options.ranges = std::move(calibrated.ranges);
  options.calibrator = CalibrationMethodName(calibration.method);
  options.percentile = calibration.percentile;
  options.calibration_samples = calibrated.samples;
  return QuantizeModelFile(in_path, out_path, options);
}

}  // namespace nee
