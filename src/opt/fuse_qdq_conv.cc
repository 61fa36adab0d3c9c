// Level-2 fusion of the QDQ form that static quantization writes (nee
// quantize --mode static, ONNX Runtime's quantize_static(QuantFormat.QDQ))
// into integer ops, so that 8-bit tensors flow from one quantized op to the
// next instead of being dequantized to float and quantized again:
//
//   Conv(DQ(x_q), DQ(W_q), [DQ(B_i32)]) [-> Relu | Clip] -> Q => QLinearConv(x_q, ..., W_q, ..., B_i32)
//   Add(DQ(a_q), DQ(b_q)) [-> Relu | Clip] -> Q        => com.microsoft QLinearAdd
//   MatMul(DQ(a_q), DQ(W_q)) [-> Relu | Clip] -> Q     => QLinearMatMul(a_q, ..., W_q, ...)
//   Gemm(DQ(a_q), DQ(W_q), [DQ(C_i32)]) [-> Relu | Clip] -> Q => com.microsoft QGemm(a_q, ..., W_q, ..., C_i32, ...)
//   DQ(q) -> MaxPool | Reshape | Transpose | Slice | ... -> Q, Q's scale and zero point DQ's
//                                                      => the op on the 8-bit values
//   DQ(q) -> GlobalAveragePool -> Q                    => com.microsoft QLinearGlobalAveragePool
//   Mul(DQ(a_q), DQ(b_q)) [-> Relu | Clip] -> Q        => com.microsoft QLinearMul
//   Concat(DQ(x_q), ...) -> Q                          => com.microsoft QLinearConcat
//
// These are the fusions ONNX Runtime makes of the same graph (its QDQ
// selectors); like its, they compute in integers and round once at the
// output, so they agree with the QDQ graph computed in float within one
// quantization step of the output (the float graph rounds the dequantized
// products and their sum in float32 first; ORT agrees with nee's fused
// result in the same way). Exactly:
// - QLinearConv: conditions are those under which the integer formula is the
//   spec's: W and B constants, B's scale the float product x_scale *
//   w_scale (per channel when W is) with zero point 0, which is how both
//   quantizers write it; per-tensor x and y.
// - QLinearMatMul likewise: a per tensor, W a constant 2-D matrix per tensor
//   or per column (axis 1), y per tensor. QGemm too (alpha = beta = 1, no
//   transA; with transB, W per row, stored transposed once), C as the Conv's
//   bias: int32 [N], scale a_scale * w_scale, zero point 0.
// - DQ -> Relu / Clip / Sigmoid ... -> Q, a chain from one 8-bit tensor to
//   another, is fuse-byte-table's (opt/fuse_byte_table.cc, run before this
//   pass): one 256-entry table, bitwise the chain.
// - QLinearConcat computes each part as DQ then Q do (bitwise the chain).
// - A Relu or Clip between Conv/Add and Q (the activation the op's output
//   alone feeds, Q the activation's output alone feeds) folds only when Q's
//   saturation clamps exactly where it would (quant::QuantizeSaturatesAt:
//   for Relu, Q's zero point is its type's lowest value; for Clip(lo, hi),
//   Q(lo) and Q(hi) are its type's ends): then Q(act(v)) == Q(v) for every
//   v, and the fused op with Q's scale and zero point is bitwise the chain's
//   integer result. nee's quantizer writes Conv -> Relu -> Q so (ONNX
//   Runtime's removes the Relu/Clip itself and writes Conv -> Q).
// - DQ -> MaxPool -> Q with one scale s and zero point: DQ is increasing
//   (s > 0), so the window's largest float is DQ of its largest byte v, and
//   Q(DQ(v)) == v: (v - zp) * s rounded once, divided by s and rounded again,
//   is within 255 * 2^-22 of v - zp (s in [2^-100, 2^100]: no subnormal
//   products, no overflow), which rounds to it exactly. Only where every
//   window holds an input element (explicit pads below the kernel, no
//   dilation, no ceil_mode): a window of padding alone would be 0.0f, Q(0)
//   the zero point, where the 8-bit MaxPool gives 0. ONNX Runtime drops the
//   pair around MaxPool on the same condition (its DropQDQNodes rule).
// - The same for ops whose every output element is one of the input's
//   elements (Reshape, Transpose, Squeeze, Unsqueeze, Flatten, Slice,
//   Gather, Expand, Tile, DepthToSpace, SpaceToDepth, Identity, nearest
//   Resize): Q(DQ(v)) == v for each, so the op on the bytes is the chain.
// Runs before constant folding, which would otherwise turn DQ(W_q) into a
// float weight; the DQ nodes left without readers go with dead-node removal.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "opt/pass_manager.h"
#include "opt/quantize.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// A node in the default domain of the given op at an opset of at least `since`.
bool IsOpSince(GraphEditor& ed, size_t index, const char* op, int64_t since) {
  return opt::IsOp(ed.node(index), op) && ed.checked().opsets[index] >= since;
}

// The DequantizeLinear or QuantizeLinear node at `index`, read as (data,
// scale, zero point, axis). Only the attribute axis is allowed (no blocked
// quantization, no output_dtype / saturate).
struct QdqNode {
  std::string data, scale, zero_point;
  int64_t axis = 1;
};
bool ReadQdq(GraphEditor& ed, size_t index, const char* op, QdqNode* q) {
  const Node& n = ed.node(index);
  if (!IsOpSince(ed, index, op, 10) || n.inputs.size() < 2 || n.outputs.size() != 1 ||
      opt::HasOtherAttributes(n, {"axis"}))
    return false;
  q->data = n.inputs[0];
  q->scale = n.inputs[1];
  q->zero_point = n.HasInput(2) ? n.inputs[2] : std::string();
  auto axis = n.GetInt("axis", 1);
  if (!axis.ok()) return false;
  q->axis = axis.value();
  return true;
}

// The DequantizeLinear producing `name` (-1 when it is not one).
int64_t DequantizeProducer(GraphEditor& ed, const std::string& name, QdqNode* q) {
  const int64_t p = ed.Producer(name);
  if (p < 0 || !ReadQdq(ed, static_cast<size_t>(p), "DequantizeLinear", q)) return -1;
  return p;
}

std::vector<int64_t> DimsOf(GraphEditor& ed, const std::string& name, bool* ok) {
  std::vector<int64_t> d;
  *ok = opt::StaticDims(ed.TensorType(name), &d);
  return d;
}

int64_t Elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// A float32 scale of one element (rank <= 1).
bool IsScalarScale(GraphEditor& ed, const std::string& name) {
  bool ok;
  const TypeInfo* t = ed.TensorType(name);
  std::vector<int64_t> d = DimsOf(ed, name, &ok);
  return t && t->elem_type == DataType::kFloat && ok && d.size() <= 1 && Elements(d) == 1;
}

// The quantized type a Q/DQ pair uses: its zero point's, else uint8 (the default).
DataType QuantType(GraphEditor& ed, const QdqNode& q) {
  if (q.zero_point.empty()) return DataType::kUint8;
  const TypeInfo* t = ed.TensorType(q.zero_point);
  return t ? t->elem_type : DataType::kUndefined;
}

// A per-tensor 8-bit quantization: scalar scale, scalar zero point (or none).
bool IsPerTensor8(GraphEditor& ed, const QdqNode& q) {
  if (!IsScalarScale(ed, q.scale) || !Is8Bit(QuantType(ed, q))) return false;
  if (q.zero_point.empty()) return true;
  bool ok;
  std::vector<int64_t> d = DimsOf(ed, q.zero_point, &ok);
  return ok && d.size() <= 1 && Elements(d) == 1;
}

// The zero point input to use: the node's own, or a new scalar 0 of `type`.
std::string ZeroPointOrNew(GraphEditor& ed, const QdqNode& q, DataType type, const std::vector<int64_t>& dims) {
  if (!q.zero_point.empty()) return q.zero_point;
  auto t = Tensor::Allocate(type, dims);  // zero-filled
  return ed.AddInitializer(q.scale + "_zero_point", std::move(t).value());
}

// ---- Relu / Clip that Q's saturation stands for (quant::QuantizeSaturatesAt) -----------

// Whether node `act` is a Relu or constant-bound Clip that Q (constant scale and zero point) clamps
// exactly as it does: Q(act(v)) == Q(v) for every v, so the activation can go.
bool QuantizeClampsAs(GraphEditor& ed, size_t act, const QdqNode& q) {
  float lo, hi, scale;
  if (!quant::ClampInterval(ed, act, &lo, &hi) || !quant::ConstantFloatScalar(ed, q.scale, &scale)) return false;
  const bool is_signed = QuantType(ed, q) == DataType::kInt8;
  int32_t zero_point = 0;
  if (!q.zero_point.empty()) {
    Tensor z = ed.Constant(q.zero_point);
    if (!z.defined() || z.num_elements() != 1 || z.dtype() != QuantType(ed, q)) return false;
    zero_point = is_signed ? z.data<int8_t>()[0] : z.data<uint8_t>()[0];
  }
  return quant::QuantizeSaturatesAt(lo, hi, scale, zero_point, is_signed);
}

// The QuantizeLinear reading `name` alone, through at most one Relu/Clip it clamps as (QuantizeClampsAs):
// its index, with the activation's in *act (-1 when none); -1 when there is no such Q.
int64_t QuantizeReader(GraphEditor& ed, const std::string& name, QdqNode* q, int64_t* act) {
  *act = -1;
  int64_t next = opt::SoleConsumer(ed, name);
  float lo, hi;
  if (next >= 0 && quant::ClampInterval(ed, static_cast<size_t>(next), &lo, &hi) &&
      ed.node(static_cast<size_t>(next)).inputs[0] == name) {
    *act = next;
    next = opt::SoleConsumer(ed, ed.node(static_cast<size_t>(next)).outputs[0]);
  }
  if (next < 0 || !ReadQdq(ed, static_cast<size_t>(next), "QuantizeLinear", q) || !IsPerTensor8(ed, *q)) return -1;
  if (*act >= 0 && !QuantizeClampsAs(ed, static_cast<size_t>(*act), *q)) return -1;
  return next;
}

// ---- Conv -> QLinearConv -------------------------------------------------------------

// The weight's DequantizeLinear: constant 8-bit W [M, C/g, k...], constant
// float scale and zero point, per tensor or per output channel (axis 0).
bool ConstantWeight(GraphEditor& ed, const QdqNode& w, int64_t* out_channels, bool* per_channel) {
  Tensor wq = ed.Constant(w.data), ws = ed.Constant(w.scale);
  if (!wq.defined() || !ws.defined() || !Is8Bit(wq.dtype()) || wq.rank() < 3 || ws.dtype() != DataType::kFloat)
    return false;
  const int64_t m = wq.dim(0);
  *out_channels = m;
  const bool scalar = ws.num_elements() == 1 && ws.rank() <= 1;
  *per_channel = !scalar;
  if (!scalar && !(ws.rank() == 1 && ws.dim(0) == m && (w.axis == 0 || w.axis == -wq.rank()))) return false;
  if (w.zero_point.empty()) return wq.dtype() == DataType::kUint8;
  Tensor wz = ed.Constant(w.zero_point);
  return wz.defined() && wz.dtype() == wq.dtype() && wz.num_elements() == ws.num_elements() &&
         wz.rank() == ws.rank();
}

// The bias's DequantizeLinear: constant int32 [M], zero point 0, scale
// exactly the float product x_scale * w_scale (per channel as W's).
bool ExactBias(GraphEditor& ed, const QdqNode& b, const std::string& x_scale, const std::string& w_scale,
               int64_t m) {
  Tensor bq = ed.Constant(b.data), bs = ed.Constant(b.scale), xs = ed.Constant(x_scale), ws = ed.Constant(w_scale);
  if (!bq.defined() || !bs.defined() || !xs.defined() || !ws.defined() || bq.dtype() != DataType::kInt32 ||
      bq.rank() != 1 || bq.dim(0) != m || bs.dtype() != DataType::kFloat || xs.dtype() != DataType::kFloat ||
      xs.num_elements() != 1)
    return false;
  const bool bias_per_channel = bs.num_elements() != 1;
  if (bias_per_channel && !(bs.rank() == 1 && bs.dim(0) == m && (b.axis == 0 || b.axis == -1))) return false;
  if (!bias_per_channel && ws.num_elements() != 1) return false;  // would need one scale per channel
  const float x = xs.data<float>()[0];
  for (int64_t i = 0; i < m; ++i) {
    const float w = ws.data<float>()[ws.num_elements() == 1 ? 0 : i];
    const float expected = x * w, got = bs.data<float>()[bias_per_channel ? i : 0];
    if (std::memcmp(&expected, &got, sizeof got) != 0) return false;
  }
  if (b.zero_point.empty()) return true;
  Tensor bz = ed.Constant(b.zero_point);
  if (!bz.defined() || bz.dtype() != DataType::kInt32) return false;
  for (int64_t i = 0; i < bz.num_elements(); ++i)
    if (bz.data<int32_t>()[i] != 0) return false;
  return true;
}

// Conv at `index` (its DQ inputs and the one Q reading it) into QLinearConv.
void TryFuseConv(GraphEditor& ed, size_t index) {
  const Node& conv = ed.node(index);
  if (!IsOpSince(ed, index, "Conv", 10) || conv.inputs.size() < 2 || conv.outputs.size() != 1) return;
  QdqNode x, w, b, y;
  if (DequantizeProducer(ed, conv.inputs[0], &x) < 0 || !IsPerTensor8(ed, x)) return;
  if (DequantizeProducer(ed, conv.inputs[1], &w) < 0) return;
  int64_t m = 0;
  bool per_channel = false;
  if (!ConstantWeight(ed, w, &m, &per_channel)) return;
  const bool has_bias = conv.HasInput(2);
  if (has_bias && (DequantizeProducer(ed, conv.inputs[2], &b) < 0 || !ExactBias(ed, b, x.scale, w.scale, m))) return;
  int64_t act = -1;
  const int64_t q_index = QuantizeReader(ed, conv.outputs[0], &y, &act);
  if (q_index < 0) return;

  const DataType x_type = QuantType(ed, x), w_type = ed.Constant(w.data).dtype();
  const std::vector<int64_t> w_zp_dims = per_channel ? std::vector<int64_t>{m} : std::vector<int64_t>{};
  std::vector<std::string> inputs = {x.data,
                                     x.scale,
                                     ZeroPointOrNew(ed, x, x_type, {}),
                                     w.data,
                                     w.scale,
                                     ZeroPointOrNew(ed, w, w_type, w_zp_dims),
                                     y.scale,
                                     ZeroPointOrNew(ed, y, QuantType(ed, y), {})};
  if (has_bias) inputs.push_back(b.data);
  std::vector<Attribute> attrs = ed.node(index).attributes;
  ed.RemoveNode(index);
  if (act >= 0) ed.RemoveNode(static_cast<size_t>(act));
  ed.RewriteAs(static_cast<size_t>(q_index), "", "QLinearConv", inputs, std::move(attrs));
}

// ---- MatMul -> QLinearMatMul -------------------------------------------------------------

// The weight's DequantizeLinear for MatMul: constant 8-bit W [K, N], constant
// float scale and zero point, per tensor or per column (axis 1).
bool ConstantMatrix(GraphEditor& ed, const QdqNode& w, bool* per_column) {
  Tensor wq = ed.Constant(w.data), ws = ed.Constant(w.scale);
  if (!wq.defined() || !ws.defined() || !Is8Bit(wq.dtype()) || wq.rank() != 2 || ws.dtype() != DataType::kFloat)
    return false;
  const bool scalar = ws.num_elements() == 1 && ws.rank() <= 1;
  *per_column = !scalar;
  if (!scalar && !(ws.rank() == 1 && ws.dim(0) == wq.dim(1) && (w.axis == 1 || w.axis == -1))) return false;
  if (w.zero_point.empty()) return wq.dtype() == DataType::kUint8;
  Tensor wz = ed.Constant(w.zero_point);
  return wz.defined() && wz.dtype() == wq.dtype() && wz.num_elements() == ws.num_elements() &&
         wz.rank() == ws.rank();
}

// MatMul at `index` (DQ of an activation times DQ of a constant matrix, read
// by one Q) into QLinearMatMul, whose integer product and one rounding are
// the spec's formula for the fused chain.
void TryFuseMatMul(GraphEditor& ed, size_t index) {
  const Node& mm = ed.node(index);
  if (!IsOpSince(ed, index, "MatMul", 10) || mm.inputs.size() != 2 || mm.outputs.size() != 1) return;
  QdqNode a, w, y;
  if (DequantizeProducer(ed, mm.inputs[0], &a) < 0 || !IsPerTensor8(ed, a)) return;
  if (DequantizeProducer(ed, mm.inputs[1], &w) < 0) return;
  bool per_column = false;
  if (!ConstantMatrix(ed, w, &per_column)) return;
  int64_t act = -1;
  const int64_t q_index = QuantizeReader(ed, mm.outputs[0], &y, &act);
  if (q_index < 0) return;
  const Tensor wq = ed.Constant(w.data);
  const std::vector<int64_t> w_zp_dims = per_column ? std::vector<int64_t>{wq.dim(1)} : std::vector<int64_t>{};
  std::vector<std::string> inputs = {a.data,
                                     a.scale,
                                     ZeroPointOrNew(ed, a, QuantType(ed, a), {}),
                                     w.data,
                                     w.scale,
                                     ZeroPointOrNew(ed, w, wq.dtype(), w_zp_dims),
                                     y.scale,
                                     ZeroPointOrNew(ed, y, QuantType(ed, y), {})};
  ed.RemoveNode(index);
  if (act >= 0) ed.RemoveNode(static_cast<size_t>(act));
  ed.RewriteAs(static_cast<size_t>(q_index), "", "QLinearMatMul", inputs, {});
}

// ---- Gemm -> com.microsoft QGemm ----------------------------------------------------------

// The weight's DequantizeLinear for Gemm: constant 8-bit W, [N, K] with transB (scale per tensor or per row,
// axis 0) or [K, N] without (per column, axis 1); zero point as ConstantMatrix's. *n: the output columns.
bool ConstantGemmWeight(GraphEditor& ed, const QdqNode& w, bool trans_b, int64_t* n, bool* per_column) {
  if (!trans_b) {
    Tensor wq = ed.Constant(w.data);
    *n = wq.defined() && wq.rank() == 2 ? wq.dim(1) : 0;
    return ConstantMatrix(ed, w, per_column);
  }
  Tensor wq = ed.Constant(w.data), ws = ed.Constant(w.scale);
  if (!wq.defined() || !ws.defined() || !Is8Bit(wq.dtype()) || wq.rank() != 2 || ws.dtype() != DataType::kFloat)
    return false;
  *n = wq.dim(0);
  const bool scalar = ws.num_elements() == 1 && ws.rank() <= 1;
  *per_column = !scalar;
  if (!scalar && !(ws.rank() == 1 && ws.dim(0) == *n && (w.axis == 0 || w.axis == -2))) return false;
  if (w.zero_point.empty()) return wq.dtype() == DataType::kUint8;
  Tensor wz = ed.Constant(w.zero_point);
  return wz.defined() && wz.dtype() == wq.dtype() && wz.num_elements() == ws.num_elements() &&
         wz.rank() == ws.rank();
}

// W [N, K] as a new [K, N] initializer (QGemm's kernel takes B untransposed).
std::string TransposedWeight(GraphEditor& ed, const std::string& name) {
  const Tensor w = ed.Constant(name);
  const int64_t n = w.dim(0), k = w.dim(1);
  Tensor t = Tensor::Allocate(w.dtype(), {k, n}).value();
  const auto* src = static_cast<const uint8_t*>(w.raw_data());
  auto* dst = static_cast<uint8_t*>(t.raw_data());
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = 0; p < k; ++p) dst[p * n + j] = src[j * k + p];
  return ed.AddInitializer(name + "_transposed", std::move(t));
}

// Gemm(DQ a, DQ W[, DQ C]) [-> Relu | Clip] -> Q (alpha = beta = 1, no transA; a per tensor, W a constant
// matrix, C the exact int32 bias of [N]) into com.microsoft QGemm(a, W, C) with Q's scale and zero point:
// the integer product plus C, rounded once (ONNX Runtime fuses the same group into its QGemm). A transposed
// W is stored transposed once, so QGemm runs without transB. Returns W's name when it was replaced.
std::string TryFuseGemm(GraphEditor& ed, size_t index) {
  const Node& gemm = ed.node(index);
  if (!IsOpSince(ed, index, "Gemm", 11) || gemm.inputs.size() < 2 || gemm.outputs.size() != 1 ||
      opt::HasOtherAttributes(gemm, {"alpha", "beta", "transA", "transB"}))
    return {};
  auto alpha = gemm.GetFloat("alpha", 1.0f), beta = gemm.GetFloat("beta", 1.0f);
  auto trans_a = gemm.GetInt("transA", 0), trans_b = gemm.GetInt("transB", 0);
  if (!alpha.ok() || !beta.ok() || !trans_a.ok() || !trans_b.ok() || alpha.value() != 1.0f ||
      trans_a.value() != 0 || (gemm.HasInput(2) && beta.value() != 1.0f))
    return {};
  QdqNode a, w, c, y;
  if (DequantizeProducer(ed, gemm.inputs[0], &a) < 0 || !IsPerTensor8(ed, a)) return {};
  if (DequantizeProducer(ed, gemm.inputs[1], &w) < 0) return {};
  int64_t n = 0;
  bool per_column = false;
  if (!ConstantGemmWeight(ed, w, trans_b.value() != 0, &n, &per_column)) return {};
  const bool has_c = gemm.HasInput(2);
  if (has_c && (DequantizeProducer(ed, gemm.inputs[2], &c) < 0 || !ExactBias(ed, c, a.scale, w.scale, n))) return {};
  int64_t act = -1;
  const int64_t q_index = QuantizeReader(ed, gemm.outputs[0], &y, &act);
  if (q_index < 0) return {};
  const DataType w_type = ed.Constant(w.data).dtype();
  const std::vector<int64_t> w_zp_dims = per_column ? std::vector<int64_t>{n} : std::vector<int64_t>{};
  const std::string weight = trans_b.value() ? TransposedWeight(ed, w.data) : w.data;
  std::vector<std::string> inputs = {a.data,
                                     a.scale,
                                     ZeroPointOrNew(ed, a, QuantType(ed, a), {}),
                                     weight,
                                     w.scale,
                                     ZeroPointOrNew(ed, w, w_type, w_zp_dims),
                                     has_c ? c.data : std::string(),
                                     y.scale,
                                     ZeroPointOrNew(ed, y, QuantType(ed, y), {})};
  const std::string replaced = trans_b.value() ? w.data : std::string();
  ed.RemoveNode(index);
  if (act >= 0) ed.RemoveNode(static_cast<size_t>(act));
  ed.RewriteAs(static_cast<size_t>(q_index), opt::kMicrosoftDomain, "QGemm", inputs, {});
  return replaced;
}

// ---- Add / Mul(DQ a, DQ b) [-> Relu | Clip] -> Q into QLinearAdd / QLinearMul, any broadcast -----------

// ONNX Runtime's fusions of the same groups (a residual sum; a squeeze-and-excitation scale times the
// pixels): the integer differences scaled by float ratios, rounded once at the output, where the chain rounds
// each dequantized value and their sum or product first: within one step of the output, as ONNX Runtime's.
void TryFuseBinary(GraphEditor& ed, size_t index, const char* op, const char* fused) {
  const Node& node = ed.node(index);
  if (!IsOpSince(ed, index, op, 7) || node.inputs.size() != 2 || node.outputs.size() != 1 || !node.attributes.empty())
    return;
  QdqNode a, b, y;
  if (DequantizeProducer(ed, node.inputs[0], &a) < 0 || DequantizeProducer(ed, node.inputs[1], &b) < 0 ||
      !IsPerTensor8(ed, a) || !IsPerTensor8(ed, b) || QuantType(ed, a) != QuantType(ed, b))
    return;
  int64_t act = -1;
  const int64_t next = QuantizeReader(ed, node.outputs[0], &y, &act);
  if (next < 0 || QuantType(ed, y) != QuantType(ed, a)) return;
  const DataType type = QuantType(ed, a);
  std::vector<std::string> inputs = {a.data, a.scale, ZeroPointOrNew(ed, a, type, {}),
                                     b.data, b.scale, ZeroPointOrNew(ed, b, type, {}),
                                     y.scale, ZeroPointOrNew(ed, y, type, {})};
  ed.RemoveNode(index);
  if (act >= 0) ed.RemoveNode(static_cast<size_t>(act));
  ed.RewriteAs(static_cast<size_t>(next), opt::kMicrosoftDomain, fused, inputs, {});
}

// ---- Concat(DQ x_1, ..., DQ x_n) -> Q into QLinearConcat -----------------------------------------------

// Each part dequantized and quantized again at Q's scale: QLinearConcat's reference computes each element
// so (its float quotient, rounded once), bitwise the chain.
void TryFuseConcat(GraphEditor& ed, size_t index) {
  const Node& concat = ed.node(index);
  if (!IsOpSince(ed, index, "Concat", 4) || concat.inputs.empty() || concat.outputs.size() != 1 ||
      opt::HasOtherAttributes(concat, {"axis"}))
    return;
  auto axis = concat.GetInt("axis", 0);
  QdqNode y;
  int64_t act = -1;
  const int64_t next = QuantizeReader(ed, concat.outputs[0], &y, &act);
  if (!axis.ok() || next < 0 || act >= 0) return;
  const DataType type = QuantType(ed, y);
  std::vector<std::string> inputs = {y.scale, ZeroPointOrNew(ed, y, type, {})};
  for (const std::string& part : concat.inputs) {
    QdqNode x;
    if (part.empty() || DequantizeProducer(ed, part, &x) < 0 || !IsPerTensor8(ed, x) || QuantType(ed, x) != type)
      return;
    const TypeInfo* bytes = ed.TensorType(x.data);
    if (!bytes || bytes->elem_type != type) return;
    inputs.insert(inputs.end(), {x.data, x.scale, ZeroPointOrNew(ed, x, type, {})});
  }
  const int64_t axis_value = axis.value();
  ed.RemoveNode(index);
  ed.RewriteAs(static_cast<size_t>(next), opt::kMicrosoftDomain, "QLinearConcat", inputs,
               {opt::IntAttr("axis", axis_value)});
}

// ---- DQ -> MaxPool or an op that moves values -> Q, one scale and zero point: the op on the 8-bit values ----

// Q's scale and zero point are DQ's (constants, equal values), the scale in [2^-100, 2^100].
bool SameQuantization(GraphEditor& ed, const QdqNode& x, const QdqNode& y) {
  float xs, ys;
  if (QuantType(ed, x) != QuantType(ed, y) || !quant::ConstantFloatScalar(ed, x.scale, &xs) ||
      !quant::ConstantFloatScalar(ed, y.scale, &ys) || xs != ys || !(xs >= 0x1p-100f && xs <= 0x1p100f))
    return false;
  auto zero_point = [&](const QdqNode& q, int32_t* z) {
    *z = 0;
    if (q.zero_point.empty()) return true;
    Tensor t = ed.Constant(q.zero_point);
    if (!t.defined() || t.num_elements() != 1 || t.dtype() != QuantType(ed, q)) return false;
    *z = t.dtype() == DataType::kInt8 ? t.data<int8_t>()[0] : t.data<uint8_t>()[0];
    return true;
  };
  int32_t zx, zy;
  return zero_point(x, &zx) && zero_point(y, &zy) && zx == zy;
}

// A MaxPool every window of which holds an input element: no auto_pad, dilations or ceil_mode, explicit
// pads below the kernel, no Indices output.
bool EveryWindowInside(const Node& pool) {
  if (pool.outputs.size() != 1 || opt::HasOtherAttributes(pool, {"kernel_shape", "pads", "strides", "storage_order",
                                                                  "ceil_mode", "dilations", "auto_pad"}))
    return false;
  auto kernel = pool.GetInts("kernel_shape", {});
  auto pads = pool.GetInts("pads", {});
  auto dilations = pool.GetInts("dilations", {});
  auto ceil_mode = pool.GetInt("ceil_mode", 0);
  auto auto_pad = pool.GetString("auto_pad", "NOTSET");
  if (!kernel.ok() || !pads.ok() || !dilations.ok() || !ceil_mode.ok() || !auto_pad.ok() || ceil_mode.value() != 0 ||
      auto_pad.value() != "NOTSET" || kernel.value().empty())
    return false;
  for (int64_t d : dilations.value())
    if (d != 1) return false;
  const std::vector<int64_t>& k = kernel.value();
  const std::vector<int64_t>& p = pads.value();
  if (!p.empty() && p.size() != 2 * k.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] < 0 || p[i] >= k[i % k.size()]) return false;
  return true;
}

// A nearest-mode Resize whose every output element is an input element (not tf_crop_and_resize, whose
// extrapolation value fills what falls outside).
bool IsNearestResize(const Node& resize) {
  auto mode = resize.GetString("mode", "nearest");
  auto transform = resize.GetString("coordinate_transformation_mode", "half_pixel");
  return mode.ok() && transform.ok() && mode.value() == "nearest" && transform.value() != "tf_crop_and_resize";
}

// Whether node `index` computes each output element as one of its input 0's elements (MaxPool: the largest of
// a window, which an increasing DQ keeps), at an opset whose op takes 8-bit tensors.
bool MovesValues(GraphEditor& ed, size_t index) {
  const Node& n = ed.node(index);
  if (n.outputs.size() != 1 || n.inputs.empty()) return false;
  if (IsOpSince(ed, index, "MaxPool", 12)) return n.inputs.size() == 1 && EveryWindowInside(n);
  if (IsOpSince(ed, index, "Resize", 11)) return IsNearestResize(n);
  // (op, the first opset at which it takes every tensor type)
  static const std::pair<const char*, int64_t> kMoves[] = {
      {"Reshape", 5}, {"Transpose", 1}, {"Squeeze", 1}, {"Unsqueeze", 1}, {"Flatten", 9}, {"Slice", 1},
      {"Gather", 1}, {"Expand", 8}, {"Tile", 6}, {"DepthToSpace", 1}, {"SpaceToDepth", 1}, {"Identity", 1}};
  for (const auto& [op, since] : kMoves)
    if (IsOpSince(ed, index, op, since)) return true;
  return false;
}

void TryDropQdqAroundMove(GraphEditor& ed, size_t index) {
  if (!MovesValues(ed, index)) return;
  const Node& op = ed.node(index);
  QdqNode x, y;
  if (DequantizeProducer(ed, op.inputs[0], &x) < 0 || !IsPerTensor8(ed, x)) return;
  // The bytes themselves of the type Q writes (a DQ without a zero point may read int32).
  const TypeInfo* bytes = ed.TensorType(x.data);
  if (!bytes || bytes->elem_type != QuantType(ed, x)) return;
  const int64_t q_index = opt::SoleConsumer(ed, op.outputs[0]);
  if (q_index < 0 || !ReadQdq(ed, static_cast<size_t>(q_index), "QuantizeLinear", &y) || !IsPerTensor8(ed, y) ||
      !SameQuantization(ed, x, y))
    return;
  std::vector<std::string> inputs = op.inputs;
  inputs[0] = x.data;
  std::vector<Attribute> attributes = op.attributes;
  const std::string op_type = op.op_type;
  ed.RemoveNode(index);
  ed.RewriteAs(static_cast<size_t>(q_index), "", op_type, inputs, std::move(attributes));
}

// ---- DQ -> GlobalAveragePool -> Q into com.microsoft QLinearGlobalAveragePool ------------------------

// ONNX Runtime's fusion of the same triple (its unary QDQ rule): the mean then comes from the integer sum
// times one float multiplier, rounded once at the output, where the chain rounds each dequantized value and
// the float sum first, so the two agree within one step of the output; the fused node is ONNX Runtime's
// result on the same QDQ model bit for bit.
void TryFuseGlobalAveragePool(GraphEditor& ed, size_t index) {
  const Node& pool = ed.node(index);
  if (!IsOpSince(ed, index, "GlobalAveragePool", 1) || pool.inputs.size() != 1 || pool.outputs.size() != 1 ||
      !pool.attributes.empty())
    return;
  QdqNode x, y;
  if (DequantizeProducer(ed, pool.inputs[0], &x) < 0 || !IsPerTensor8(ed, x)) return;
  const TypeInfo* bytes = ed.TensorType(x.data);
  if (!bytes || bytes->elem_type != QuantType(ed, x)) return;
  const int64_t q_index = opt::SoleConsumer(ed, pool.outputs[0]);
  if (q_index < 0 || !ReadQdq(ed, static_cast<size_t>(q_index), "QuantizeLinear", &y) || !IsPerTensor8(ed, y) ||
      QuantType(ed, y) != QuantType(ed, x))
    return;
  const DataType type = QuantType(ed, x);
  std::vector<std::string> inputs = {x.data, x.scale, ZeroPointOrNew(ed, x, type, {}), y.scale,
                                     ZeroPointOrNew(ed, y, type, {})};
  ed.RemoveNode(index);
  ed.RewriteAs(static_cast<size_t>(q_index), opt::kMicrosoftDomain, "QLinearGlobalAveragePool", inputs,
               {opt::IntAttr("channels_last", 0)});
}

}  // namespace

Status FuseQdqConv(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  std::vector<std::string> replaced_weights;  // transposed copies took their place
  for (size_t index : checked.order) {
    if (ed.removed(index)) continue;
    TryFuseConv(ed, index);
    if (!ed.removed(index)) TryFuseMatMul(ed, index);
    if (!ed.removed(index)) {
      std::string replaced = TryFuseGemm(ed, index);
      if (!replaced.empty()) replaced_weights.push_back(std::move(replaced));
    }
    if (!ed.removed(index)) TryFuseBinary(ed, index, "Add", "QLinearAdd");
    if (!ed.removed(index)) TryFuseBinary(ed, index, "Mul", "QLinearMul");
    if (!ed.removed(index)) TryFuseConcat(ed, index);
    if (!ed.removed(index)) TryDropQdqAroundMove(ed, index);
    if (!ed.removed(index)) TryFuseGlobalAveragePool(ed, index);
  }
  // The DequantizeLinear nodes nothing reads any more (weights, biases): gone
  // now, before constant folding would dequantize them for nothing.
  for (size_t index : checked.order) {
    const Node& n = ed.node(index);
    if (!ed.removed(index) && opt::IsOp(n, "DequantizeLinear") && n.outputs.size() == 1 &&
        !ed.IsPinned(n.outputs[0]) && ed.Uses(n.outputs[0]).empty())
      ed.RemoveNode(index);
  }
  *changed = ed.CommitDroppingInitializers(replaced_weights);
  return Status::Ok();
}

}  // namespace nee
