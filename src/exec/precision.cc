#include "exec/precision.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "format/npy.h"
#include "format/onnx_reader.h"
#include "ir/float_formats.h"
#include "ir/inline_functions.h"
#include "opt/quantize.h"

namespace nee {
namespace {

namespace fs = std::filesystem;

// The element types compared: float32, float64, float16 and bfloat16 (the
// last two read as float32).
bool IsComparedFloat(DataType t) {
  return t == DataType::kFloat || t == DataType::kDouble || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

bool IsComparedFloat(const TypeInfo& t) { return t.is_tensor() && IsComparedFloat(t.elem_type); }

std::string TypeName(DataType t) { return DataTypeNumpyName(t); }

// The tensor's values as doubles (float16/bfloat16 widened exactly).
std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.num_elements()));
  const size_t n = out.size();
  switch (t.dtype()) {
    case DataType::kFloat: for (size_t i = 0; i < n; ++i) out[i] = t.data<float>()[i]; break;
    case DataType::kDouble: for (size_t i = 0; i < n; ++i) out[i] = t.data<double>()[i]; break;
    case DataType::kFloat16:
      for (size_t i = 0; i < n; ++i) out[i] = HalfToFloat(static_cast<const uint16_t*>(t.raw_data())[i]);
      break;
    case DataType::kBFloat16:
      for (size_t i = 0; i < n; ++i) out[i] = BFloat16ToFloat(static_cast<const uint16_t*>(t.raw_data())[i]);
      break;
    default: break;
  }
  return out;
}

// Float32 values ordered as integers: adjacent floats differ by 1, +0 and -0 are both 0.
int64_t OrderedBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return (bits & 0x80000000u) ? -static_cast<int64_t>(bits & 0x7fffffffu) : static_cast<int64_t>(bits);
}

// ULP histogram: distances below 1024 exactly, above by 64 buckets an octave.
constexpr int kExactUlps = 1024;
constexpr int kUlpBuckets = kExactUlps + 23 * 64;
int UlpBucket(uint64_t u) {
  if (u < kExactUlps) return static_cast<int>(u);
  int e = 63 - __builtin_clzll(u);  // 10..32
  int sub = static_cast<int>((u >> (e - 6)) & 63);
  return kExactUlps + (e - 10) * 64 + sub;
}
double UlpBucketValue(int b) {
  if (b < kExactUlps) return b;
  int e = (b - kExactUlps) / 64 + 10, sub = (b - kExactUlps) % 64;
  double lo = std::ldexp(64 + sub, e - 6), width = std::ldexp(1, e - 6);
  return lo + (width - 1) / 2;
}

}  // namespace

Status PrecisionAccumulator::Add(const Tensor& model, const Tensor& reference) {
  if (model.num_elements() != reference.num_elements())
    return InvalidArgument("shape " + model.Describe() + " vs reference " + reference.Describe());
  if (ulp_histogram_.empty()) ulp_histogram_.assign(kUlpBuckets, 0);
  const std::vector<double> a = ToDoubles(model), b = ToDoubles(reference);
  const size_t n = a.size();
  double sample_max = 0;
  for (double y : b)
    if (std::isfinite(y)) sample_max = std::max(sample_max, std::abs(y));
  m_.ref_max_abs = std::max(m_.ref_max_abs, sample_max);
  double floor = 1e-6 * sample_max;
  if (floor == 0) floor = std::numeric_limits<float>::min();
  m_.elements += static_cast<int64_t>(n);
  for (size_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    const bool finite = std::isfinite(x) && std::isfinite(y);
    if (!finite) {
      // Same infinity or both NaN: agreement; anything else is a mismatch.
      if (!(x == y || (std::isnan(x) && std::isnan(y)))) ++m_.nonfinite_mismatches;
      continue;
    }
    ++finite_pairs_;
    const double diff = std::abs(x - y);
    m_.max_abs = std::max(m_.max_abs, diff);
    m_.max_rel = std::max(m_.max_rel, diff / std::max(std::abs(y), floor));
    sum_sq_ += diff * diff;
    dot_ += x * y;
    norm_a_ += x * x;
    norm_b_ += y * y;
    const int64_t d = OrderedBits(static_cast<float>(x)) - OrderedBits(static_cast<float>(y));
    const uint64_t u = static_cast<uint64_t>(d < 0 ? -d : d);
    m_.ulp_max = std::max(m_.ulp_max, u);
    ++ulp_histogram_[UlpBucket(u)];
  }
  // Top-1 over the last axis: rank >= 2 with a last dim of at least 2, or a vector of at least 2 scores.
  const auto& dims = reference.dims();
  if (!dims.empty() && dims.back() >= 2 && n > 0) {
    const size_t row = static_cast<size_t>(dims.back());
    for (size_t r = 0; r + row <= n; r += row) {
      size_t ia = r, ib = r;
      for (size_t j = r + 1; j < r + row; ++j) {
        if (a[j] > a[ia]) ia = j;
        if (b[j] > b[ib]) ib = j;
      }
      ++m_.top1_rows;
      if (ia == ib) ++m_.top1_agree;
    }
  }
  return Status::Ok();
}

PrecisionMetrics PrecisionAccumulator::Finish() const {
  PrecisionMetrics m = m_;
  if (finite_pairs_ > 0) {
    m.rms = std::sqrt(sum_sq_ / static_cast<double>(finite_pairs_));
    if (norm_a_ == 0 && norm_b_ == 0) m.cosine = 1;
    else if (norm_a_ == 0 || norm_b_ == 0) m.cosine = 0;
    else if (sum_sq_ == 0) m.cosine = 1;  // identical
    else {
      const double product = norm_a_ * norm_b_;  // (inf only for float64 values beyond 1e154)
      const double denominator = std::isfinite(product) ? std::sqrt(product) : std::sqrt(norm_a_) * std::sqrt(norm_b_);
      m.cosine = std::clamp(dot_ / denominator, -1.0, 1.0);
    }
    // The median as numpy takes it: the mean of the two middle order statistics.
    const int64_t k1 = (finite_pairs_ - 1) / 2, k2 = finite_pairs_ / 2;
    double v1 = 0, v2 = 0;
    int64_t seen = 0;
    bool have1 = false;
    for (int bucket = 0; bucket < kUlpBuckets; ++bucket) {
      const int64_t c = ulp_histogram_[bucket];
      if (c == 0) continue;
      if (!have1 && seen + c > k1) {
        v1 = UlpBucketValue(bucket);
        have1 = true;
      }
      if (seen + c > k2) {
        v2 = UlpBucketValue(bucket);
        break;
      }
      seen += c;
    }
    m.ulp_median = (v1 + v2) / 2;
  }
  return m;
}

namespace {

struct Loaded {
  Model model;                       // as read (for the per-layer copy)
  std::unique_ptr<Session> session;  // as written
};

Result<Loaded> MakeSession(Model model, const std::string& what, const SessionOptions& options) {
  Loaded l;
  l.model = std::move(model);
  auto session = Session::Create(l.model, options);
  if (!session.ok()) return session.status().WithContext(what + ": ");
  l.session = std::move(session).value();
  return l;
}

Result<Loaded> Load(const std::string& path, const char* what, const SessionOptions& options) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return IoError(std::string(what) + " '" + path + "' is not a readable file");
  auto model = ReadModelFile(path);
  if (!model.ok()) return model.status().WithContext(std::string(what) + ": ");  // (the reader names the file)
  return MakeSession(std::move(model).value(), std::string(what) + " '" + path + "'", options);
}

// The model computed in float64 where its ops allow it: nee quantize's
// narrow-float conversion with float64 as the target type (the same rules:
// each op's type constraints at the model's opset, Casts at the edges). Its
// graph inputs and outputs stay float32, so its outputs are the float64
// results rounded once; the values inside are float64. It runs at the basic
// optimization level, on the reference kernels (nee's fast kernels and fused
// ops are float32 ones).
Result<Loaded> InFloat64(const Loaded& source, SessionOptions options) {
  Model copy = source.model;
  DetachSubgraphs(copy);
  NEE_RETURN_IF_ERROR(InlineModelFunctions(copy));
  QuantizeReport report;
  Status converted = quant::ConvertToNarrowFloat(copy, QuantizeOptions{}, DataType::kDouble, &report);
  if (!converted.ok()) return converted.WithContext("making the float64 reference: ");
  if (report.converted.empty())
    return InvalidArgument("--fp64: no node of the reference model computes in float64 (no float32 computation, or "
                           "no op of it allows double)");
  options.graph_optimization_level = 1;
  return MakeSession(std::move(copy), "the float64 reference", options);
}

// The model `nee quantize --mode <variant>` would write, made in memory.
Result<Loaded> MakeVariant(const Loaded& source, const std::string& variant, const SessionOptions& options) {
  QuantizeOptions q;
  if (variant == "int8" || variant == "dynamic") q.mode = QuantizeMode::kDynamic;
  else if (variant == "fp16") q.mode = QuantizeMode::kFloat16;
  else if (variant == "bf16") q.mode = QuantizeMode::kBFloat16;
  else if (variant == "int4") q.mode = QuantizeMode::kInt4;  // block size 32, as nee quantize's default
  else return InvalidArgument("--variant " + variant + ": expected int8 (dynamic), fp16, bf16 or int4");
  Model copy = source.model;
  DetachSubgraphs(copy);
  auto report = QuantizeModel(copy, q);
  if (!report.ok()) return report.status().WithContext("making the " + variant + " variant: ");
  return MakeSession(std::move(copy), "the " + variant + " variant", options);
}

std::string ShapeText(const TypeInfo& t) {
  if (!t.shape) return "?";
  std::string s = "[";
  for (size_t i = 0; i < t.shape->size(); ++i) s += (i ? "," : "") + (*t.shape)[i].ToString();
  return s + "]";
}

// The inputs of both models must be the same: names, element types and static dims.
Status CompareInputs(const Session& model, const Session& ref, const std::string& model_path,
                     const std::string& ref_path) {
  const std::string prefix = "the models' inputs differ: ";
  for (const ValueInfo& r : ref.inputs()) {
    auto it = std::find_if(model.inputs().begin(), model.inputs().end(),
                           [&](const ValueInfo& m) { return m.name == r.name; });
    if (it == model.inputs().end())
      return InvalidArgument(prefix + "input '" + r.name + "' of " + ref_path + " is not an input of " + model_path);
    const TypeInfo &mt = it->type, &rt = r.type;
    if (!mt.SameKindAndElemType(rt))
      return InvalidArgument(prefix + "input '" + r.name + "' is " + mt.ToString() + " in " + model_path + " but " +
                             rt.ToString() + " in " + ref_path);
    if (mt.shape && rt.shape) {
      bool same = mt.shape->size() == rt.shape->size();
      for (size_t d = 0; same && d < mt.shape->size(); ++d)
        if ((*mt.shape)[d].known() && (*rt.shape)[d].known() && (*mt.shape)[d].value != (*rt.shape)[d].value)
          same = false;
      if (!same)
        return InvalidArgument(prefix + "input '" + r.name + "' has shape " + ShapeText(mt) + " in " + model_path +
                               " but " + ShapeText(rt) + " in " + ref_path);
    }
  }
  for (const ValueInfo& m : model.inputs()) {
    bool found = false;
    for (const ValueInfo& r : ref.inputs()) found = found || r.name == m.name;
    if (!found)
      return InvalidArgument(prefix + "input '" + m.name + "' of " + model_path + " is not an input of " + ref_path);
  }
  return Status::Ok();
}

Result<Value> RandomValue(const ValueInfo& vi, const std::map<std::string, int64_t>& dims, std::mt19937_64& rng) {
  if (!vi.type.is_tensor() || !vi.type.shape)
    return InvalidArgument("input '" + vi.name + "' (" + vi.type.ToString() +
                           ") has no static tensor type, so random values cannot fill it; give --inputs");
  std::vector<int64_t> shape;
  for (const Dim& d : *vi.type.shape) {
    int64_t size = d.value;
    if (!d.known()) {
      auto it = dims.find(d.symbol);
      size = it != dims.end() ? it->second : 1;
    }
    shape.push_back(size);
  }
  const DataType t = vi.type.elem_type;
  NEE_ASSIGN_OR_RETURN(Tensor tensor, Tensor::Allocate(t, shape));
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  const int64_t n = tensor.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    switch (t) {
      case DataType::kFloat: tensor.data<float>()[i] = static_cast<float>(real(rng)); break;
      case DataType::kDouble: tensor.data<double>()[i] = real(rng); break;
      case DataType::kFloat16:
        static_cast<uint16_t*>(tensor.raw_data())[i] = FloatToHalf(static_cast<float>(real(rng)));
        break;
      case DataType::kBFloat16:
        static_cast<uint16_t*>(tensor.raw_data())[i] = FloatToBFloat16(static_cast<float>(real(rng)));
        break;
      case DataType::kInt64: tensor.data<int64_t>()[i] = small(rng); break;
      case DataType::kInt32: tensor.data<int32_t>()[i] = small(rng); break;
      case DataType::kBool: static_cast<uint8_t*>(tensor.raw_data())[i] = small(rng) & 1; break;
      case DataType::kUint8: case DataType::kInt8:
        static_cast<uint8_t*>(tensor.raw_data())[i] = static_cast<uint8_t>(small(rng));
        break;
      default:
        return NotImplemented("input '" + vi.name + "' is " + vi.type.ToString() +
                              ": random values of that type are not made; give --inputs");
    }
  }
  return Value(std::move(tensor));
}

Result<Value> LoadInputFile(const std::string& path, const ValueInfo& vi) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return IoError("input '" + vi.name + "': file '" + path + "' does not exist");
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    auto t = ReadNpyFile(path);
    if (!t.ok()) return t.status().WithContext("input '" + vi.name + "': ");
    return Value(std::move(t).value());
  }
  auto value = ReadValueProtoFileAs(path, vi.type);
  if (!value.ok()) return value.status().WithContext("input '" + vi.name + "': ");
  return std::move(value).value();
}

// One sample from a folder: input_<i>.pb, input_<i>.npy or <name>.npy per input.
Result<std::vector<NamedValue>> LoadSampleDir(const fs::path& dir, const std::vector<ValueInfo>& inputs,
                                              const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<NamedValue> sample;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo& vi = inputs[i];
    auto given = std::find_if(files.begin(), files.end(), [&](const auto& f) { return f.first == vi.name; });
    std::string path;
    if (given != files.end()) {
      path = given->second;
    } else if (!dir.empty()) {
      std::string safe = vi.name;
      for (char& c : safe)
        if (c == '/' || c == '\\' || c == ':') c = '_';
      const std::string idx = "input_" + std::to_string(i);
      for (const std::string& name : {idx + ".pb", idx + ".npy", vi.name + ".npy", safe + ".npy"}) {
        std::error_code ec;
        if (name.find('/') == std::string::npos && fs::is_regular_file(dir / name, ec)) {
          path = (dir / name).string();
          break;
        }
      }
      if (path.empty())
        return InvalidArgument("input '" + vi.name + "' was not found in '" + dir.string() + "' (looked for " + idx +
                               ".pb, " + idx + ".npy and " + safe + ".npy)");
    } else {
      return InvalidArgument("input '" + vi.name + "' was not given (--input NAME=FILE or --inputs DIR)");
    }
    NEE_ASSIGN_OR_RETURN(Value v, LoadInputFile(path, vi));
    sample.push_back({vi.name, std::move(v)});
  }
  return sample;
}

bool HoldsInputFiles(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file(ec) && (ext == ".pb" || ext == ".npy")) return true;
  }
  return false;
}

Result<std::vector<std::vector<NamedValue>>> GatherSamples(const PrecisionRequest& req, const Session& ref,
                                                           std::string* source) {
  const auto& inputs = ref.inputs();
  std::vector<std::vector<NamedValue>> samples;
  for (const auto& [name, file] : req.input_files) {
    bool known = false;
    for (const auto& vi : inputs) known = known || vi.name == name;
    if (!known) {
      std::string names;
      for (const auto& vi : inputs) names += (names.empty() ? "" : ", ") + vi.name;
      return InvalidArgument("--input " + name + "=" + file + ": the models have no input '" + name +
                             "' (inputs: " + names + ")");
    }
  }
  if (!req.samples.empty()) {
    *source = "given values";
    for (const auto& given : req.samples) {
      std::vector<NamedValue> sample;
      for (const auto& vi : inputs) {
        auto it = std::find_if(given.begin(), given.end(), [&](const NamedValue& nv) { return nv.name == vi.name; });
        if (it == given.end()) return InvalidArgument("sample " + std::to_string(samples.size()) +
                                                      ": input '" + vi.name + "' was not given");
        sample.push_back(*it);
      }
      for (const auto& nv : given) {
        bool known = false;
        for (const auto& vi : inputs) known = known || vi.name == nv.name;
        if (!known) return InvalidArgument("the models have no input '" + nv.name + "'");
      }
      samples.push_back(std::move(sample));
    }
    return samples;
  }
  if (!req.inputs_dir.empty()) {
    std::error_code ec;
    const fs::path dir = req.inputs_dir;
    if (!fs::is_directory(dir, ec)) return IoError("--inputs '" + req.inputs_dir + "' is not a folder");
    if (HoldsInputFiles(dir)) {
      *source = "folder " + req.inputs_dir;
      NEE_ASSIGN_OR_RETURN(auto sample, LoadSampleDir(dir, inputs, req.input_files));
      samples.push_back(std::move(sample));
      return samples;
    }
    std::vector<fs::path> subdirs;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_directory(ec) && HoldsInputFiles(e.path())) subdirs.push_back(e.path());
    std::sort(subdirs.begin(), subdirs.end());
    if (subdirs.empty())
      return InvalidArgument("--inputs '" + req.inputs_dir +
                             "' holds no .pb or .npy input files, nor subfolders holding them");
    *source = "folder " + req.inputs_dir + " (" + std::to_string(subdirs.size()) + " subfolders)";
    for (const auto& sub : subdirs) {
      NEE_ASSIGN_OR_RETURN(auto sample, LoadSampleDir(sub, inputs, req.input_files));
      samples.push_back(std::move(sample));
    }
    return samples;
  }
  if (!req.input_files.empty()) {
    *source = "files";
    NEE_ASSIGN_OR_RETURN(auto sample, LoadSampleDir({}, inputs, req.input_files));
    samples.push_back(std::move(sample));
    return samples;
  }
  const int64_t count = req.random_samples > 0 ? req.random_samples : 8;
  *source = "random (seed " + std::to_string(req.seed) + ")";
  std::mt19937_64 rng(req.seed);
  for (int64_t s = 0; s < count; ++s) {
    std::vector<NamedValue> sample;
    for (const auto& vi : inputs) {
      NEE_ASSIGN_OR_RETURN(Value v, RandomValue(vi, req.dims, rng));
      sample.push_back({vi.name, std::move(v)});
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

// A session's output types by name.
std::unordered_map<std::string, TypeInfo> OutputTypes(const Session& s) {
  std::unordered_map<std::string, TypeInfo> types;
  for (const auto& vi : s.outputs()) types[vi.name] = vi.type;
  return types;
}

// What a pair of tensors is compared in: float64 when either side is float64.
std::string ComparedIn(DataType a, DataType b) {
  return a == DataType::kDouble || b == DataType::kDouble ? "float64" : "float32";
}

// `model` with `names` (values of its main graph) added as graph outputs.
Model WithOutputs(Model model, const std::vector<std::string>& names) {
  std::unordered_set<std::string> present;
  for (const auto& o : model.graph.outputs) present.insert(o.name);
  for (const auto& n : names)
    if (present.insert(n).second) model.graph.outputs.push_back(ValueInfo{n, TypeInfo{}, {}, {}});
  return model;
}

struct Pair {
  TensorComparison c;
  PrecisionAccumulator acc;
  std::string model_name;
};

Status Accumulate(Pair& p, const Value& model, const Value& ref, int64_t sample) {
  if (!p.c.skipped.empty()) return Status::Ok();
  if (!model.is_tensor() || !ref.is_tensor()) {
    p.c.skipped = "not a tensor";
    return Status::Ok();
  }
  if (model.tensor().dims() != ref.tensor().dims()) {
    p.c.skipped = "shape " + model.tensor().Describe() + " vs reference " + ref.tensor().Describe() + " (sample " +
                  std::to_string(sample) + ")";
    return Status::Ok();
  }
  return p.acc.Add(model.tensor(), ref.tensor());
}

std::string Num(double v, const char* fmt = "%.3g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

Json NumberOrNull(double v) { return std::isfinite(v) ? Json::Number(v) : Json(); }

Json ComparisonJson(const TensorComparison& c) {
  Json j = Json::Object();
  j.Set("name", c.name);
  j.Set("model_name", c.model_name);
  j.Set("model_type", c.model_type);
  j.Set("reference_type", c.reference_type);
  if (!c.skipped.empty()) {
    j.Set("skipped", c.skipped);
    return j;
  }
  const PrecisionMetrics& m = c.metrics;
  j.Set("compared_in", c.compared_in);
  j.Set("elements", Json::Number(static_cast<double>(m.elements)));
  j.Set("nonfinite_mismatches", Json::Number(static_cast<double>(m.nonfinite_mismatches)));
  j.Set("max_abs", NumberOrNull(m.max_abs));
  j.Set("max_rel", NumberOrNull(m.max_rel));
  j.Set("ulp_max", Json::Number(static_cast<double>(m.ulp_max)));
  j.Set("ulp_median", NumberOrNull(m.ulp_median));
  j.Set("cosine", NumberOrNull(m.cosine));
  j.Set("rms", NumberOrNull(m.rms));
  j.Set("reference_max_abs", NumberOrNull(m.ref_max_abs));
  j.Set("top1_rows", Json::Number(static_cast<double>(m.top1_rows)));
  j.Set("top1_agreement",
        m.top1_rows > 0 ? Json::Number(static_cast<double>(m.top1_agree) / static_cast<double>(m.top1_rows)) : Json());
  return j;
}

std::string TableOf(const std::vector<TensorComparison>& rows, bool numbered) {
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"name", "type", "max_abs", "max_rel", "ulp_max", "ulp_med", "cosine", "rms", "top1"});
  if (numbered) cells[0].insert(cells[0].begin(), "#");
  size_t index = 0;
  for (const auto& c : rows) {
    std::string name = c.name == c.model_name                                   ? c.name
                       : c.model_name == c.name + "_DequantizeLinear_Output" ? c.name + " (dequantized)"
                                                                             : c.name + " <- " + c.model_name;
    std::string type = c.model_type == c.reference_type ? c.model_type : c.model_type + "/" + c.reference_type;
    std::vector<std::string> row;
    if (c.skipped.empty()) {
      const PrecisionMetrics& m = c.metrics;
      std::string top1 = m.top1_rows > 0 ? Num(100.0 * static_cast<double>(m.top1_agree) /
                                                   static_cast<double>(m.top1_rows), "%.2f%%")
                                         : "-";
      row = {name, type, Num(m.max_abs), Num(m.max_rel), std::to_string(m.ulp_max), Num(m.ulp_median, "%.4g"),
             Num(m.cosine, "%.8f"), Num(m.rms), top1};
      if (m.nonfinite_mismatches > 0) row.back() += "  (" + std::to_string(m.nonfinite_mismatches) + " NaN/inf mismatches)";
    } else {
      row = {name, type, "skipped: " + c.skipped};
    }
    if (numbered) row.insert(row.begin(), std::to_string(index));
    ++index;
    cells.push_back(std::move(row));
  }
  std::vector<size_t> width;
  for (const auto& row : cells)
    for (size_t i = 0; i + 1 < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  std::string out;
  for (const auto& row : cells) {
    std::string line = "  ";
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace

Json PrecisionReport::ToJson() const {
  Json j = Json::Object();
  j.Set("model", model_path);
  j.Set("reference", reference_path);
  j.Set("samples", Json::Number(static_cast<double>(samples)));
  j.Set("inputs", input_source);
  j.Set("output_matching", output_matching);
  j.Set("relative_error", "|a - r| / max(|r|, 1e-6 * max|r| of the tensor in that sample)");
  j.Set("ulp", "float32 bit distance (float16/bfloat16 widened to float32, float64 rounded to float32)");
  Json outs = Json::Array();
  for (const auto& c : outputs) outs.Push(ComparisonJson(c));
  j.Set("outputs", std::move(outs));
  if (per_layer) {
    Json ls = Json::Array();
    for (const auto& c : layers) ls.Push(ComparisonJson(c));
    j.Set("layers", std::move(ls));
    j.Set("layers_unmatched", Json::Number(static_cast<double>(layers_unmatched)));
  }
  Json gates = Json::Object();
  gates.Set("max_top1_drop_percent", max_top1_drop_percent >= 0 ? Json::Number(max_top1_drop_percent) : Json());
  gates.Set("max_abs", max_abs >= 0 ? Json::Number(max_abs) : Json());
  Json failures = Json::Array();
  for (const auto& f : gate_failures) failures.Push(Json::String(f));
  gates.Set("failures", std::move(failures));
  gates.Set("passed", Json::Bool(gate_failures.empty()));
  j.Set("gates", std::move(gates));
  return j;
}

std::string PrecisionReport::Table() const {
  std::string out = "model:     " + model_path + "\nreference: " + reference_path + "\ninputs:    " +
                    std::to_string(samples) + (samples == 1 ? " sample, " : " samples, ") + input_source + "\n\n";
  out += "outputs (matched by " + output_matching + "):\n" + TableOf(outputs, false);
  if (per_layer) {
    out += "\nlayers (reference's topological order; " + std::to_string(layers.size()) + " shared float values";
    if (layers_unmatched > 0) out += ", " + std::to_string(layers_unmatched) + " of the reference's not in the model";
    out += "):\n" + TableOf(layers, true);
  }
  bool narrow = false;
  for (const auto* list : {&outputs, &layers})
    for (const auto& c : *list)
      for (const std::string& t : {c.model_type, c.reference_type}) narrow = narrow || t == "float16" || t == "bfloat16";
  if (narrow) out += "\n(float16 and bfloat16 values are compared in float32; type reads model/reference where they differ)\n";
  return out;
}

Result<PrecisionReport> ComparePrecision(const PrecisionRequest& req) {
  SessionOptions options;
  options.intra_op_num_threads = req.threads;
  // Four sessions take turns: idle pools should not poll for work while another runs.
  options.allow_spinning = false;
  PrecisionReport report;
  Loaded model, ref;
  if (!req.variant.empty()) {
    if (!req.reference_path.empty())
      return InvalidArgument("a variant (--variant " + req.variant + ") is compared against the model it is made "
                             "from: give --variant or --against, not both");
    NEE_ASSIGN_OR_RETURN(ref, Load(req.model_path, "model", options));
    NEE_ASSIGN_OR_RETURN(model, MakeVariant(ref, req.variant, options));
    report.model_path = req.model_path + " (" + req.variant + " variant, as nee quantize makes it)";
    report.reference_path = req.model_path;
  } else {
    if (req.reference_path.empty()) return InvalidArgument("no reference model (--against) and no --variant");
    NEE_ASSIGN_OR_RETURN(model, Load(req.model_path, "model", options));
    NEE_ASSIGN_OR_RETURN(ref, Load(req.reference_path, "reference model", options));
    NEE_RETURN_IF_ERROR(CompareInputs(*model.session, *ref.session, req.model_path, req.reference_path));
    report.model_path = req.model_path;
    report.reference_path = req.reference_path;
  }
  if (req.fp64_reference) {
    NEE_ASSIGN_OR_RETURN(ref, InFloat64(ref, options));
    report.reference_path += " (in float64)";
  }
  report.per_layer = req.per_layer;
  report.max_top1_drop_percent = req.max_top1_drop_percent;
  report.max_abs = req.max_abs;

  // Outputs: by name, or by position when no name matches and the counts agree.
  const auto& mouts = model.session->outputs();
  const auto& routs = ref.session->outputs();
  std::vector<std::pair<int, int>> matched;  // (model index, reference index)
  for (size_t r = 0; r < routs.size(); ++r)
    for (size_t m = 0; m < mouts.size(); ++m)
      if (mouts[m].name == routs[r].name) matched.push_back({static_cast<int>(m), static_cast<int>(r)});
  report.output_matching = "name";
  if (matched.empty() && mouts.size() == routs.size()) {
    report.output_matching = "position";
    for (size_t i = 0; i < routs.size(); ++i) matched.push_back({static_cast<int>(i), static_cast<int>(i)});
  }
  if (matched.empty())
    return InvalidArgument("the models' outputs share no name and differ in number (" + std::to_string(mouts.size()) +
                           " vs " + std::to_string(routs.size()) + "), so none can be compared");
  std::vector<Pair> outs;
  for (auto [m, r] : matched) {
    Pair p;
    p.c.name = routs[r].name;
    p.c.model_name = mouts[m].name;
    const TypeInfo &mt = mouts[m].type, &rt = routs[r].type;
    p.c.model_type = mt.is_tensor() ? TypeName(mt.elem_type) : mt.ToString();
    p.c.reference_type = rt.is_tensor() ? TypeName(rt.elem_type) : rt.ToString();
    if (!IsComparedFloat(mt) || !IsComparedFloat(rt)) p.c.skipped = "not a float tensor";
    else p.c.compared_in = ComparedIn(mt.elem_type, rt.elem_type);
    outs.push_back(std::move(p));
  }
  if (std::none_of(outs.begin(), outs.end(), [](const Pair& p) { return p.c.skipped.empty(); })) {
    std::string list;
    for (const auto& p : outs) list += (list.empty() ? "" : ", ") + p.c.name + " (" + p.c.reference_type + ")";
    return InvalidArgument("no float outputs to compare: the matched outputs are " + list);
  }

  // Layers: every node output of the reference's main graph (Constant nodes
  // aside) that the model also computes: as <name>_DequantizeLinear_Output
  // where a QDQ quantizer (ONNX Runtime's) quantized it, which is the value the
  // rest of the quantized model reads (the same-named float value before the
  // QuantizeLinear may differ from it, e.g. a Relu the quantizer folded into
  // the quantization's range), else under the same name.
  std::vector<Pair> layers;
  std::unique_ptr<Session> layer_model, layer_ref;
  if (req.per_layer) {
    std::unordered_set<std::string> model_values;
    for (const auto& node : model.model.graph.nodes)
      for (const auto& o : node.outputs)
        if (!o.empty()) model_values.insert(o);
    std::vector<std::string> ref_names;
    std::unordered_set<std::string> seen;
    for (const auto& node : ref.model.graph.nodes) {
      if (node.op_type == "Constant" && (node.domain.empty() || node.domain == "ai.onnx")) continue;
      for (const auto& o : node.outputs)
        if (!o.empty() && seen.insert(o).second) ref_names.push_back(o);
    }
    std::vector<std::string> model_names;
    for (const auto& n : ref_names) {
      if (model_values.count(n)) model_names.push_back(n);
      if (model_values.count(n + "_DequantizeLinear_Output")) model_names.push_back(n + "_DequantizeLinear_Output");
    }
    auto lm = Session::Create(WithOutputs(model.model, model_names), options);
    if (!lm.ok()) return lm.status().WithContext("the model with its intermediate values as outputs: ");
    auto lr = Session::Create(WithOutputs(ref.model, ref_names), options);
    if (!lr.ok()) return lr.status().WithContext("the reference model with its intermediate values as outputs: ");
    layer_model = std::move(lm).value();
    layer_ref = std::move(lr).value();
    const auto mtypes = OutputTypes(*layer_model), rtypes = OutputTypes(*layer_ref);
    for (const auto& n : ref_names) {
      auto rt = rtypes.find(n);
      if (rt == rtypes.end() || !IsComparedFloat(rt->second)) continue;
      std::string match;
      for (const std::string& candidate : {n + "_DequantizeLinear_Output", n}) {
        auto mt = mtypes.find(candidate);
        if (model_values.count(candidate) && mt != mtypes.end() && IsComparedFloat(mt->second)) {
          match = candidate;
          break;
        }
      }
      if (match.empty()) {
        ++report.layers_unmatched;
        continue;
      }
      Pair p;
      p.c.name = n;
      p.c.model_name = match;
      p.c.model_type = TypeName(mtypes.at(match).elem_type);
      p.c.reference_type = TypeName(rt->second.elem_type);
      p.c.compared_in = ComparedIn(mtypes.at(match).elem_type, rt->second.elem_type);
      layers.push_back(std::move(p));
    }
  }

  std::vector<std::vector<NamedValue>> samples;
  {
    std::string source;
    NEE_ASSIGN_OR_RETURN(samples, GatherSamples(req, *ref.session, &source));
    report.input_source = source;
  }
  report.samples = static_cast<int64_t>(samples.size());
  std::vector<std::string> layer_model_names, layer_ref_names;
  for (const auto& p : layers) {
    layer_model_names.push_back(p.c.model_name);
    layer_ref_names.push_back(p.c.name);
  }
  for (size_t s = 0; s < samples.size(); ++s) {
    const std::string where = "sample " + std::to_string(s);
    auto mo = model.session->Run(samples[s], {});
    if (!mo.ok()) return mo.status().WithContext(where + ", model: ");
    auto ro = ref.session->Run(samples[s], {});
    if (!ro.ok()) return ro.status().WithContext(where + ", reference model: ");
    for (size_t i = 0; i < outs.size(); ++i) {
      Status st = Accumulate(outs[i], (*mo)[matched[i].first], (*ro)[matched[i].second], static_cast<int64_t>(s));
      if (!st.ok()) return st.WithContext("output '" + outs[i].c.name + "': ");
    }
    if (!layers.empty()) {
      auto lmo = layer_model->Run(samples[s], layer_model_names);
      if (!lmo.ok()) return lmo.status().WithContext(where + ", model (intermediate values): ");
      auto lro = layer_ref->Run(samples[s], layer_ref_names);
      if (!lro.ok()) return lro.status().WithContext(where + ", reference model (intermediate values): ");
      for (size_t i = 0; i < layers.size(); ++i) {
        Status st = Accumulate(layers[i], (*lmo)[i], (*lro)[i], static_cast<int64_t>(s));
        if (!st.ok()) return st.WithContext("value '" + layers[i].c.name + "': ");
      }
    }
  }
  for (auto& p : outs) {
    if (p.c.skipped.empty()) p.c.metrics = p.acc.Finish();
    report.outputs.push_back(std::move(p.c));
  }
  for (auto& p : layers) {
    if (p.c.skipped.empty()) p.c.metrics = p.acc.Finish();
    report.layers.push_back(std::move(p.c));
  }
  for (const auto& c : report.outputs) {
    if (!c.skipped.empty()) continue;
    const PrecisionMetrics& m = c.metrics;
    if (req.max_top1_drop_percent >= 0 && m.top1_rows > 0) {
      const double drop = 100.0 * (1.0 - static_cast<double>(m.top1_agree) / static_cast<double>(m.top1_rows));
      if (drop > req.max_top1_drop_percent)
        report.gate_failures.push_back("output '" + c.name + "': top-1 agreement dropped by " + Num(drop, "%.2f") +
                                       "% (" + std::to_string(m.top1_rows - m.top1_agree) + " of " +
                                       std::to_string(m.top1_rows) + " rows), more than --max-top1-drop " +
                                       Num(req.max_top1_drop_percent, "%g") + "%");
    }
    if (req.max_abs >= 0 && (m.max_abs > req.max_abs || m.nonfinite_mismatches > 0))
      report.gate_failures.push_back("output '" + c.name + "': max abs error " + Num(m.max_abs) +
                                     (m.nonfinite_mismatches > 0
                                          ? " and " + std::to_string(m.nonfinite_mismatches) + " NaN/inf mismatches"
                                          : std::string()) +
                                     ", more than --max-abs " + Num(req.max_abs, "%g"));
  }
  return report;
}

}  // namespace nee
