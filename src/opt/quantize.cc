// The driver of `nee quantize` (opt/quantize.h): options, the file function
// with its lineage record, and the summary.
#include "opt/quantize.h"

#include <algorithm>
#include <cstdio>
#include <unordered_set>

#include "base/json.h"
#include "check/checker.h"
#include "format/lineage.h"
#include "format/metadata_edit.h"
#include "format/onnx_reader.h"
#include "format/onnx_writer.h"
#include "ir/inline_functions.h"
#include "ops/attr_spec.h"
#include "ops/op_registry.h"
#include "opt/opset_convert.h"

namespace nee {

namespace {

uint64_t InitializerBytes(const Graph& graph) {
  uint64_t total = 0;
  for (const Initializer& init : graph.initializers) total += init.tensor.byte_size();
  return total;
}

// Every excluded name must be a node of the main graph: a misspelt name would
// otherwise quantize the node the user meant to protect.
Status CheckExcluded(const Graph& graph, const std::vector<std::string>& exclude) {
  std::unordered_set<std::string> names;
  for (const Node& node : graph.nodes) names.insert(node.name);
  for (const std::string& name : exclude) {
    if (name.empty()) return InvalidArgument("--exclude: an empty node name");
    if (!names.count(name)) return InvalidArgument("--exclude: the model has no node named '" + name + "'");
  }
  return Status::Ok();
}

// Conv, ConvTranspose and the pools allow bfloat16 only from opset 22 (MatMul,
// Add, Relu from 13): converted at opset 17, a CNN would keep every Conv in
// float32 and compute only the activations between them in bfloat16, each
// behind a pair of Casts - slower than float32 and less exact. So a bf16
// target whose model imports an older default-domain opset is converted to
// this one first, when that converts and lets more nodes take bfloat16.
constexpr int64_t kBFloat16ConvOpset = 22;

// Main-graph nodes whose declaration allows bfloat16 for some type letter,
// among those writing one of `outputs` (the original model's nodes: the
// Constants a conversion adds, such as Squeeze's axes turned inputs, allow
// bfloat16 at any opset and say nothing about what computes in it).
size_t NodesAllowingBFloat16(Model& model, const std::unordered_set<std::string>& outputs) {
  BindAttrDeclarations(model);
  size_t count = 0;
  for (const Node& node : model.graph.nodes) {
    if (!node.declaration || node.outputs.empty() || !outputs.count(node.outputs[0])) continue;
    for (const TypeConstraint& c : node.declaration->constraints) {
      if (c.allowed && std::find(c.allowed->begin(), c.allowed->end(), "tensor(bfloat16)") != c.allowed->end()) {
        ++count;
        break;
      }
    }
  }
  return count;
}

void UpgradeOpsetForBFloat16(Model& model, QuantizeReport* report) {
  const int64_t from = model.OpsetVersion("");
  if (from < 0 || from >= kBFloat16ConvOpset) return;
  Model upgraded = model;
  Result<OpsetConversionReport> converted = ConvertModelOpset(upgraded, kBFloat16ConvOpset);
  if (!converted.ok()) {
    report->notes.push_back("kept opset " + std::to_string(from) + " (converting to " +
                            std::to_string(kBFloat16ConvOpset) + " failed: " + converted.status().message() + ")");
    return;
  }
  std::unordered_set<std::string> original_outputs;
  for (const Node& node : model.graph.nodes)
    if (!node.outputs.empty()) original_outputs.insert(node.outputs[0]);
  if (NodesAllowingBFloat16(upgraded, original_outputs) <= NodesAllowingBFloat16(model, original_outputs)) return;
  model = std::move(upgraded);
  report->opset_from = from;
  report->opset_to = kBFloat16ConvOpset;
  report->notes.push_back("opset " + std::to_string(from) + " -> " + std::to_string(kBFloat16ConvOpset) +
                          " first, where Conv and the pools take bfloat16");
}

}  // namespace

Result<QuantizeMode> ParseQuantizeMode(const std::string& text) {
  if (text == "dynamic") return QuantizeMode::kDynamic;
  if (text == "fp16") return QuantizeMode::kFloat16;
  if (text == "static") return QuantizeMode::kStatic;
  if (text == "bf16") return QuantizeMode::kBFloat16;
  if (text == "int4") return QuantizeMode::kInt4;
  return InvalidArgument("unknown quantization mode '" + text + "' (expected dynamic, static, fp16, bf16 or int4)");
}

const char* QuantizeModeName(QuantizeMode mode) {
  switch (mode) {
    case QuantizeMode::kDynamic:
      return "dynamic";
    case QuantizeMode::kStatic:
      return "static";
    case QuantizeMode::kBFloat16:
      return "bf16";
    case QuantizeMode::kInt4:
      return "int4";
    case QuantizeMode::kFloat16:
      break;
  }
  return "fp16";
}

std::string QuantizeReport::Text() const {
  std::string out;
  char line[256];
  const char* verb = mode == QuantizeMode::kDynamic  ? "quantized to int8 (dynamic)"
                     : mode == QuantizeMode::kStatic ? "quantized to int8 (static, QDQ)"
                     : mode == QuantizeMode::kBFloat16 ? "computing in bfloat16"
                     : mode == QuantizeMode::kInt4     ? "with weights quantized to int4 (MatMulNBits)"
                                                       : "computing in float16";
  std::snprintf(line, sizeof line, "%zu nodes %s, %zu left as they were\n", converted.size(), verb, skipped.size());
  out += line;
  for (const std::string& note : notes) out += note + "\n";
  constexpr size_t kListed = 40;  // the rest are counted (the lineage record lists every rewritten node)
  for (size_t i = 0; i < skipped.size() && i < kListed; ++i) out += "  kept: " + skipped[i] + "\n";
  if (skipped.size() > kListed) out += "  ... and " + std::to_string(skipped.size() - kListed) + " more kept\n";
  std::snprintf(line, sizeof line, "nodes: %zu -> %zu", nodes_before, nodes_after);
  out += line;
  if (mode == QuantizeMode::kFloat16 || mode == QuantizeMode::kBFloat16) {
    std::snprintf(line, sizeof line, " (%zu casts at %s/float32 boundaries)", casts_added,
                  mode == QuantizeMode::kFloat16 ? "float16" : "bfloat16");
    out += line;
  }
  out += "\n";
  const double ratio = weight_bytes_before ? static_cast<double>(weight_bytes_after) / weight_bytes_before : 1.0;
  std::snprintf(line, sizeof line, "weights: %llu -> %llu bytes (%.1f%%)\n",
                static_cast<unsigned long long>(weight_bytes_before),
                static_cast<unsigned long long>(weight_bytes_after), 100.0 * ratio);
  out += line;
  if (values_clamped) {
    std::snprintf(line, sizeof line, "%zu weights beyond float16's range saturated to +-65504\n", values_clamped);
    out += line;
  }
  return out;
}

Result<QuantizeReport> QuantizeModel(Model& model, const QuantizeOptions& options) {
  NEE_RETURN_IF_ERROR(InlineModelFunctions(model));
  NEE_RETURN_IF_ERROR(CheckExcluded(model.graph, options.exclude));
  QuantizeReport report;
  report.mode = options.mode;
  report.nodes_before = model.graph.nodes.size();
  report.weight_bytes_before = InitializerBytes(model.graph);
  if (options.mode == QuantizeMode::kDynamic) {
    NEE_RETURN_IF_ERROR(quant::QuantizeDynamic(model, options, &report));
  } else if (options.mode == QuantizeMode::kStatic) {
    NEE_RETURN_IF_ERROR(quant::QuantizeStatic(model, options, &report));
  } else if (options.mode == QuantizeMode::kInt4) {
    NEE_RETURN_IF_ERROR(quant::QuantizeInt4(model, options, &report));
  } else {
    if (options.mode == QuantizeMode::kBFloat16) UpgradeOpsetForBFloat16(model, &report);
    const DataType narrow = options.mode == QuantizeMode::kBFloat16 ? DataType::kBFloat16 : DataType::kFloat16;
    NEE_RETURN_IF_ERROR(quant::ConvertToNarrowFloat(model, options, narrow, &report));
  }
  report.nodes_after = model.graph.nodes.size();
  report.weight_bytes_after = InitializerBytes(model.graph);
  return report;
}

Result<QuantizeReport> QuantizeModelFile(const std::string& in_path, const std::string& out_path,
                                         const QuantizeOptions& options) {
  NEE_ASSIGN_OR_RETURN(Model model, ReadModelFile(in_path));
  NEE_ASSIGN_OR_RETURN(LineageRecorder lineage, LineageRecorder::Begin(in_path, model));
  NEE_ASSIGN_OR_RETURN(QuantizeReport report, QuantizeModel(model, options));
  // What `nee quantize` hands out must load.
  BindAttrDeclarations(model);
  Result<CheckedGraph> checked = CheckModel(model, OpRegistry::Global());
  if (!checked.ok())
    return InvalidArgument("the quantized model does not check (a bug in nee quantize): " +
                           checked.status().message());
  Json excluded = Json::Array();
  for (const std::string& name : options.exclude) excluded.Push(Json::String(name));
  Json quantized = Json::Array();
  for (const std::string& name : report.converted) quantized.Push(Json::String(name));
  Json params = Json::Object();
  params.Set("mode", QuantizeModeName(options.mode));
  if (options.mode == QuantizeMode::kDynamic) {
    params.Set("weight_type", "int8")
        .Set("activation_type", "uint8")
        .Set("symmetric_weights", Json::Bool(true))
        .Set("per_channel", Json::Bool(options.per_channel))
        .Set("reduce_range", Json::Bool(options.reduce_range))
        .Set("op_types",
             Json::Array().Push(Json::String("MatMul")).Push(Json::String("Gemm")).Push(Json::String("Gather")));
  } else if (options.mode == QuantizeMode::kStatic) {
    Json calibrator = Json::Object();
    calibrator.Set("method", options.calibrator.empty() ? "given" : options.calibrator.c_str());
    if (options.calibrator == "percentile") calibrator.Set("percentile", Json::Number(options.percentile));
    if (options.calibrator == "percentile") calibrator.Set("bins", Json::Number(16384));
    if (options.calibrator == "entropy") calibrator.Set("bins", Json::Number(2048));
    params.Set("format", "QDQ")
        .Set("weight_type", "int8")
        .Set("activation_type", "uint8")
        .Set("symmetric_weights", Json::Bool(true))
        .Set("symmetric_activations", Json::Bool(options.symmetric_activations))
        .Set("per_channel", Json::Bool(options.per_channel))
        .Set("calibrator", std::move(calibrator))
        .Set("calibration_samples", Json::Number(static_cast<double>(options.calibration_samples)))
        .Set("op_types", Json::Array()
                             .Push(Json::String("Conv"))
                             .Push(Json::String("MatMul"))
                             .Push(Json::String("Gemm")));
  } else if (options.mode == QuantizeMode::kInt4) {
    params.Set("format", "MatMulNBits")
        .Set("weight_type", "int4")
        .Set("bits", Json::Number(4))
        .Set("block_size", Json::Number(static_cast<double>(options.block_size)))
        .Set("symmetric_weights", Json::Bool(false))
        .Set("op_types", Json::Array().Push(Json::String("MatMul")));
  } else {
    params.Set("keep_io_types", Json::Bool(true));
    if (report.opset_from)
      params.Set("opset_upgraded", Json::Object()
                                       .Set("from", Json::Number(static_cast<double>(report.opset_from)))
                                       .Set("to", Json::Number(static_cast<double>(report.opset_to))));
  }
  params.Set("excluded_nodes", std::move(excluded)).Set("nodes", std::move(quantized));
  NEE_RETURN_IF_ERROR(lineage.Append(model, "quantize", std::move(params)));
  NEE_RETURN_IF_ERROR(WriteModelFile(model, out_path, KeepingExternalData(model, in_path)));
  return report;
}

}  // namespace nee
