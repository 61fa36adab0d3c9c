// The C API for the model file tools: optimize, convert opset, quantize
// (dynamic, int4, static from calibration data), compare precision. Split
// from c_api.cc, which holds sessions; like it, conversions only, no logic.
#include <string>
#include <vector>

#include "exec/calibrate.h"
#include "exec/optimize_file.h"
#include "exec/precision.h"
#include "opt/opset_convert.h"
#include "opt/quantize.h"
#include "nee/nee.h"

#include "api/c_api_util.h"

using namespace nee::c_api_util;  // NOLINT: the helpers every file of the C API uses

extern "C" {

nee_status_t nee_model_optimize_file(const char* in_path, const char* out_path, int32_t level, char* report,
                                     size_t capacity, size_t* out_length) {
  if (!in_path) return NullArg("in_path");
  if (!out_path) return NullArg("out_path");
  return Guard([&]() -> nee_status_t {
    nee::Result<std::string> text = nee::OptimizeModelFile(in_path, out_path, level);
    if (!text.ok()) return MakeStatus(text.status());
    FillString(*text, report, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_model_convert_opset(const char* in_path, const char* out_path, int64_t opset, char* report,
                                     size_t capacity, size_t* out_length) {
  if (!in_path) return NullArg("in_path");
  if (!out_path) return NullArg("out_path");
  return Guard([&]() -> nee_status_t {
    nee::Result<nee::OpsetConversionReport> r = nee::ConvertOpsetFile(in_path, out_path, opset);
    if (!r.ok()) return MakeStatus(r.status());
    FillString(r->Text(), report, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_model_quantize(const char* in_path, const char* out_path, const char* mode,
                                const char* const* exclude, size_t num_exclude, int32_t flags, char* report,
                                size_t capacity, size_t* out_length) {
  if (!in_path) return NullArg("in_path");
  if (!out_path) return NullArg("out_path");
  if (!mode) return NullArg("mode");
  if (num_exclude > 0 && !exclude) return NullArg("exclude");
  if (flags & ~(NEE_QUANTIZE_PER_CHANNEL | NEE_QUANTIZE_REDUCE_RANGE))
    return Err(NEE_STATUS_INVALID_ARGUMENT, ("unknown quantize flags " + std::to_string(flags)).c_str());
  return Guard([&]() -> nee_status_t {
    nee::Result<nee::QuantizeMode> parsed = nee::ParseQuantizeMode(mode);
    if (!parsed.ok()) return MakeStatus(parsed.status());
    if (*parsed == nee::QuantizeMode::kStatic)
      return Err(NEE_STATUS_INVALID_ARGUMENT,
                 "static quantization needs calibration data: use nee_model_quantize_static");
    nee::QuantizeOptions options;
    options.mode = *parsed;
    for (size_t i = 0; i < num_exclude; ++i) {
      if (!exclude[i]) return NullArg(("exclude[" + std::to_string(i) + "]").c_str());
      options.exclude.emplace_back(exclude[i]);
    }
    options.per_channel = (flags & NEE_QUANTIZE_PER_CHANNEL) != 0;
    options.reduce_range = (flags & NEE_QUANTIZE_REDUCE_RANGE) != 0;
    nee::Result<nee::QuantizeReport> r = nee::QuantizeModelFile(in_path, out_path, options);
    if (!r.ok()) return MakeStatus(r.status());
    FillString(r->Text(), report, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_model_quantize_int4(const char* in_path, const char* out_path, int64_t block_size,
                                     const char* const* exclude, size_t num_exclude, char* report, size_t capacity,
                                     size_t* out_length) {
  if (!in_path) return NullArg("in_path");
  if (!out_path) return NullArg("out_path");
  if (num_exclude > 0 && !exclude) return NullArg("exclude");
  return Guard([&]() -> nee_status_t {
    nee::QuantizeOptions options;
    options.mode = nee::QuantizeMode::kInt4;
    options.block_size = block_size;
    for (size_t i = 0; i < num_exclude; ++i) {
      if (!exclude[i]) return NullArg(("exclude[" + std::to_string(i) + "]").c_str());
      options.exclude.emplace_back(exclude[i]);
    }
    nee::Result<nee::QuantizeReport> r = nee::QuantizeModelFile(in_path, out_path, options);
    if (!r.ok()) return MakeStatus(r.status());
    FillString(r->Text(), report, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_model_compare_precision(const char* model_path, const char* reference_path,
                                         const nee_precision_options_t* options, nee_value_t** out_report) {
  if (!model_path) return NullArg("model_path");
  if (!reference_path && !(options && options->variant)) return NullArg("reference_path");
  if (!out_report) return NullArg("out_report");
  *out_report = nullptr;
  return Guard([&]() -> nee_status_t {
    nee::PrecisionRequest req;
    req.model_path = model_path;
    if (reference_path) req.reference_path = reference_path;
    if (options) {
      if (options->variant) req.variant = options->variant;
      req.fp64_reference = options->fp64_reference != 0;
      const nee_precision_options_t& o = *options;
      if (o.num_samples > 0 && o.num_inputs > 0) {
        if (!o.input_names || !o.input_values) return NullArg("input_names / input_values");
        for (size_t s = 0; s < o.num_samples; ++s) {
          std::vector<nee::NamedValue> sample;
          for (size_t i = 0; i < o.num_inputs; ++i) {
            const nee_value_t* v = o.input_values[s * o.num_inputs + i];
            if (!o.input_names[i] || !v) return NullArg("an input name or value");
            sample.push_back({o.input_names[i], v->value});
          }
          req.samples.push_back(std::move(sample));
        }
      }
      if (o.inputs_dir) req.inputs_dir = o.inputs_dir;
      if (o.random_samples < 0) return Err(NEE_STATUS_INVALID_ARGUMENT, "random_samples must not be negative");
      req.random_samples = o.random_samples;
      if (o.num_dims > 0 && (!o.dim_symbols || !o.dim_values)) return NullArg("dim_symbols / dim_values");
      for (size_t i = 0; i < o.num_dims; ++i) {
        if (!o.dim_symbols[i]) return NullArg("a dim symbol");
        if (o.dim_values[i] < 0) return Err(NEE_STATUS_INVALID_ARGUMENT, "a dim value must not be negative");
        req.dims[o.dim_symbols[i]] = o.dim_values[i];
      }
      if (o.seed != 0) req.seed = o.seed;
      req.threads = o.threads;
      req.per_layer = o.no_layers == 0;
      req.max_top1_drop_percent = o.max_top1_drop;
      req.max_abs = o.max_abs;
    }
    nee::Result<nee::PrecisionReport> report = nee::ComparePrecision(req);
    if (!report.ok()) return MakeStatus(report.status());
    auto t = nee::Tensor::Allocate(nee::DataType::kString, {});
    if (!t.ok()) return MakeStatus(t.status());
    t->data<std::string>()[0] = report->ToJson().Serialize(-1);
    *out_report = Wrap(nee::Value(std::move(t).value()));
    return nullptr;
  });
}

nee_status_t nee_model_quantize_static(const char* in_path, const char* out_path, const char* calibration_dir,
                                       const char* calibrator, double percentile, const char* const* exclude,
                                       size_t num_exclude, int32_t flags, char* report, size_t capacity,
                                       size_t* out_length) {
  if (!in_path) return NullArg("in_path");
  if (!out_path) return NullArg("out_path");
  if (!calibration_dir) return NullArg("calibration_dir");
  if (!calibrator) return NullArg("calibrator");
  if (num_exclude > 0 && !exclude) return NullArg("exclude");
  if (flags & ~(NEE_QUANTIZE_PER_CHANNEL | NEE_QUANTIZE_REDUCE_RANGE | NEE_QUANTIZE_SYMMETRIC_ACTIVATIONS |
                NEE_QUANTIZE_PROGRESS))
    return Err(NEE_STATUS_INVALID_ARGUMENT, ("unknown static quantize flags " + std::to_string(flags)).c_str());
  return Guard([&]() -> nee_status_t {
    nee::Result<nee::CalibrationMethod> method = nee::ParseCalibrationMethod(calibrator);
    if (!method.ok()) return MakeStatus(method.status());
    nee::QuantizeOptions options;
    options.mode = nee::QuantizeMode::kStatic;
    for (size_t i = 0; i < num_exclude; ++i) {
      if (!exclude[i]) return NullArg(("exclude[" + std::to_string(i) + "]").c_str());
      options.exclude.emplace_back(exclude[i]);
    }
    options.per_channel = (flags & NEE_QUANTIZE_PER_CHANNEL) != 0;
    options.reduce_range = (flags & NEE_QUANTIZE_REDUCE_RANGE) != 0;
    options.symmetric_activations = (flags & NEE_QUANTIZE_SYMMETRIC_ACTIVATIONS) != 0;
    nee::CalibrationOptions calibration;
    calibration.dir = calibration_dir;
    calibration.method = *method;
    calibration.percentile = percentile;
    calibration.progress = (flags & NEE_QUANTIZE_PROGRESS) != 0;
    nee::Result<nee::QuantizeReport> r = nee::QuantizeStaticFile(in_path, out_path, options, calibration);
    if (!r.ok()) return MakeStatus(r.status());
    FillString(r->Text(), report, capacity, out_length);
    return nullptr;
  });
}

}  // extern "C"
