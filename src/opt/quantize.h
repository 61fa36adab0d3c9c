// `nee quantize IN -o OUT --mode dynamic|static|fp16|bf16`: a model rewritten to lower
// precision, written back as a standard ONNX model (ai.onnx ops only) that
// ONNX Runtime loads and runs too. docs/quantization.md describes the modes.
//
//   dynamic (quantize_dynamic.cc): every MatMul, and every Gemm without
//     transA, whose B is a constant float32 2-D initializer gets its weights
//     quantized once to int8, symmetric (zero point 0; scale = max|w| / 127,
//     per tensor or, with per_channel, per output column; reduce_range: 7 bits,
//     max|w| / 64, for CPUs whose u8s8 kernels saturate int16 pair sums),
//     and computes
//       DynamicQuantizeLinear(A) -> MatMulInteger(A_q, W_q, A_zp, W_zp)
//       -> Cast(float) -> Mul(A_scale * W_scale) [-> Add(bias)]
//     as ONNX Runtime's quantize_dynamic(weight_type=QInt8) writes it (one
//     DynamicQuantizeLinear per distinct A). Everything else stays float32.
//   static (quantize_static.cc; calibration in exec/calibrate.h): QDQ form,
//     as ONNX Runtime's quantize_static(quant_format=QDQ, activation_type=
//     QUInt8, weight_type=QInt8) writes it, for Conv, MatMul and Gemm: each
//     float activation such a node reads or writes goes through a
//     QuantizeLinear -> DequantizeLinear pair (uint8, scale and zero point
//     from its calibrated range widened to include 0), constant weights are
//     int8 symmetric initializers (per tensor, or per output channel) read
//     through DequantizeLinear, and a constant bias of Conv/Gemm is int32
//     with scale input_scale * weight_scale, read through DequantizeLinear.
//     An output a Relu/Clip alone reads is quantized after the activation
//     instead, when that quantization clamps as the activation does.
//     The ranges come in QuantizeOptions::ranges (plain data: src/opt does
//     not run models).
//   fp16, bf16 (quantize_narrow_float.cc): float32 initializers and computation become
//     float16 (bfloat16); the graph's inputs and outputs (and values a subgraph reads)
//     keep float32 through Casts at the edges. A node stays float32 when its
//     op's declaration at the model's opset does not allow the type for a
//     position, when it computes shapes (fed by Shape/Size), when its output
//     type comes from an attribute, when it holds a subgraph, when it is not
//     in the ai.onnx domain, and when it is excluded. bf16 converts a model
//     importing a default-domain opset below 22 to 22 first (when that
//     converts and lets more nodes take bfloat16: Conv and the pools allow it
//     from 22), so that a CNN's convolutions compute in bfloat16 too.
//   int4 (quantize_int4.cc): weight-only; every MatMul whose B is a constant
//     float32 [K, N] initializer becomes com.microsoft MatMulNBits with 4-bit
//     weights, asymmetric per block of block_size values along K (scale and
//     zero point per block, the last block zero-padded), as ONNX Runtime's
//     MatMulNBitsQuantizer (is_symmetric=False) writes it. A stays float32.
//
// Only the main graph is rewritten (subgraph bodies keep float32).
// Model-local functions are expanded first, as `nee optimize` does.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "ir/graph.h"

namespace nee {

enum class QuantizeMode { kDynamic, kFloat16, kStatic, kBFloat16, kInt4 };

// "dynamic" / "static" / "fp16" / "bf16" / "int4"; an InvalidArgument listing the modes otherwise.
Result<QuantizeMode> ParseQuantizeMode(const std::string& text);
const char* QuantizeModeName(QuantizeMode mode);

struct QuantizeOptions {
  QuantizeMode mode = QuantizeMode::kDynamic;
  // Node names left as they are; each must name a node of the main graph.
  std::vector<std::string> exclude;
  // dynamic: one scale per output column of W instead of one per tensor.
  bool per_channel = false;
  // dynamic and static: 7-bit weights in [-64, 64] (ONNX Runtime's reduce_range).
  bool reduce_range = false;
  // static: the calibrated range of every activation the quantized nodes
  // read or write (quant::StaticCalibrationTensors lists them); a node with
  // an activation missing here is left in float (and listed as kept).
  struct Range {
    float min = 0, max = 0;
  };
  std::map<std::string, Range> ranges;
  // static: activation range symmetric around 0 (zero point 128).
  bool symmetric_activations = false;
  // static, for the lineage record only: how the ranges were computed.
  std::string calibrator;         // "minmax" / "percentile" / "entropy"
  double percentile = 0;          // percentile: the percentile used
  size_t calibration_samples = 0;
  // int4: weights per scale and zero point along K (a power of two >= 16).
  int64_t block_size = 32;
};

struct QuantizeReport {
  QuantizeMode mode = QuantizeMode::kDynamic;
  std::vector<std::string> converted;  // nodes rewritten (dynamic: quantized; fp16/bf16: computing in float16/bfloat16)
  // Candidates left as they were, each "node 'x' (Op): why".
  std::vector<std::string> skipped;
  size_t nodes_before = 0, nodes_after = 0;
  size_t casts_added = 0;            // fp16/bf16: Cast nodes at the narrow/float32 boundaries
  size_t values_clamped = 0;         // fp16: weights beyond float16's range, saturated to +-65504
  uint64_t weight_bytes_before = 0;  // bytes of the main graph's initializers
  uint64_t weight_bytes_after = 0;
  // bf16: the default-domain opset the model was converted from and to first
  // (0: not converted; quantize.cc says when and why).
  int64_t opset_from = 0, opset_to = 0;
  std::vector<std::string> notes;  // lines for the summary (the opset conversion)
  std::string Text() const;
};

// Rewrites `model` in place (functions expanded, then checked). On error the
// model is left in an unspecified state (callers quantize a copy).
Result<QuantizeReport> QuantizeModel(Model& model, const QuantizeOptions& options);

// Reads `in_path`, quantizes it, checks the result with nee's checker,
// appends a lineage record ("quantize": mode, parameters, excluded nodes;
// the record's input carries the source file's sha256) and writes
// `out_path`. Writes nothing on error.
Result<QuantizeReport> QuantizeModelFile(const std::string& in_path, const std::string& out_path,
                                         const QuantizeOptions& options);

namespace opt {
class GraphEditor;
}

namespace quant {
// Why a node of an op the quantizer rewrites is left as it is before its
// inputs are looked at: "excluded" (named in QuantizeOptions::exclude), or
// "unexpected inputs or outputs" (no A or B, not one named output); "" when
// it goes on to the rewrite's own checks.
std::string WhyNotCandidateNode(const Node& node, const std::unordered_set<std::string>& excluded);
// Why MatMul(a, b) is not a float32 activation times a constant float32
// matrix, as the MatMul rewrites (dynamic, int4) need it ("A is not a float32
// tensor", ...); "" when it is, with the matrix in *w.
std::string WhyNotFloatTimesConstantMatrix(const opt::GraphEditor& ed, const std::string& a, const std::string& b,
                                           Tensor* w);
// The passes, on a model whose functions are expanded; each checks the main
// graph itself (types, constants) before rewriting it.
Status QuantizeDynamic(Model& model, const QuantizeOptions& options, QuantizeReport* report);
// `narrow`: DataType::kFloat16 or kBFloat16.
Status ConvertToNarrowFloat(Model& model, const QuantizeOptions& options, DataType narrow, QuantizeReport* report);
Status QuantizeStatic(Model& model, const QuantizeOptions& options, QuantizeReport* report);
Status QuantizeInt4(Model& model, const QuantizeOptions& options, QuantizeReport* report);
// A [K, N] float32 matrix as MatMulNBits' inputs (exposed for tests): b
// uint8 [N, blocks, block_size / 2], scales float [N, blocks], zero_points
// uint8 [N, ceil(blocks / 2)] (quantize_int4.cc states the rounding). Fails
// when a weight is NaN or infinite or the block size is not a power of two >= 16.
struct Int4Weights {
  Tensor b, scales, zero_points;
};
Status QuantizeWeightsInt4(const Tensor& w, int64_t block_size, Int4Weights* out);
// The float activations (graph inputs and node outputs, no initializers) that
// static quantization of `model` would quantize under `options` (exclusions
// applied; ranges ignored), in node order: what calibration must measure.
// Expands the model's functions first (as QuantizeModel does).
Result<std::vector<std::string>> StaticCalibrationTensors(Model& model, const QuantizeOptions& options);
// Activation quantization parameters from a range, as ONNX Runtime's
// compute_scale_zp computes them for uint8: the range widened to include 0
// (and made symmetric with `symmetric`), scale = (max - min) / 255 in double
// stored as float, zero point round_half_even(-min / scale) (128 when
// symmetric); scale 1 and zero point 0 for an empty range.
void ActivationScaleZeroPoint(float min, float max, bool symmetric, float* scale, uint8_t* zero_point);
// Symmetric int8 quantization of a float32 tensor of any rank, per tensor
// (axis < 0) or with one scale per index of `axis` (values in [-127, 127];
// scale = max|w| / 127, 1 where the group is all 0; reduce_range: [-64, 64]
// and max|w| / 64). Fails on NaN/Inf.
Status QuantizeWeightsPerAxis(const Tensor& w, int64_t axis, bool reduce_range, Tensor* quantized, Tensor* scales);

// ---- Activations a QuantizeLinear can stand for (the static quantizer and fuse-qdq-conv share these) ----
//
// Q(clamp(v, lo, hi)) == Q(v) for every v when Q(lo) is Q's lowest value and Q(hi) its highest (Q is
// monotone: below lo both give Q(lo), above hi both Q(hi)). Relu is clamp(v, 0, +inf), Clip(min, max) is
// clamp(v, min, max): after such a check the activation can go, Q's saturation clamps where it would.

// A float32 scalar constant: an initializer or a Constant node's value (one element, any rank).
bool ConstantFloatScalar(opt::GraphEditor& ed, const std::string& name, float* value);
// The interval node `index` clamps its one input to: Relu (opset 6+) [0, +inf); Clip (opset 11+)
// [min, max] from constant float scalar inputs, an absent bound infinite. False for any other node.
bool ClampInterval(opt::GraphEditor& ed, size_t index, float* lo, float* hi);
// QuantizeLinear of one float as the spec computes it: round_half_even(v / scale) (in float) plus the
// zero point, saturated to uint8's (int8's with is_signed) range; false when v / scale is NaN.
bool QuantizeScalar(float v, float scale, int32_t zero_point, bool is_signed, int32_t* q);
// Whether Q(scale, zero point) saturates exactly where clamping to [lo, hi] would (Q(lo) lowest, Q(hi)
// highest), so that Q(clamp(v, lo, hi)) == Q(v) bitwise for every v.
bool QuantizeSaturatesAt(float lo, float hi, float scale, int32_t zero_point, bool is_signed);

// Symmetric int8 quantization of a [K, N] float32 matrix (exposed for tests):
// `scales` gets one value (per tensor) or N (per column); values in
// [-qmax, qmax] with qmax 127 (or 64 with reduce_range). A scale is 1 where
// the weights are all 0. Fails when a weight is NaN or infinite.
Status QuantizeWeightsSymmetric(const Tensor& w, bool per_channel, bool reduce_range, Tensor* quantized,
                                Tensor* scales);
}  // namespace quant

}  // namespace nee
