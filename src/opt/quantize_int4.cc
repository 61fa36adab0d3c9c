// Weight-only int4 quantization (opt/quantize.h, mode "int4"): every MatMul
// whose B is a constant float32 [K, N] initializer becomes com.microsoft
// MatMulNBits (ops/matmul_nbits.h) with 4-bit weights quantized block-wise
// along K, asymmetric per block, as ONNX Runtime's MatMulNBitsQuantizer
// (is_symmetric=False, QOperator format) writes them:
//
//   for column n, block b (block_size values of k; the last block of a K
//   that is not a multiple of it padded with zeros):
//     lo = min(min w, 0), hi = max(max w, 0)           (the range holds 0)
//     scale = (hi - lo) / 15                           (float)
//     zp = clamp(round(-lo / scale), 0, 15)            (0 when scale is 0)
//     q = clamp(round(w * (1 / scale) + zp), 0, 15)    (round half away from 0)
//   B [N, blocks, block_size / 2] uint8, two values a byte, the lower k in
//   the low nibble; scales float [N, blocks]; zero_points uint8 [N,
//   ceil(blocks / 2)], the even block in the low nibble (an odd count's last
//   high nibble 8, as ONNX Runtime leaves it).
//
// The node keeps its name, inputs A and output; the float weights nothing
// else reads are dropped. A weight read by several MatMuls is quantized once.
// Skipped, with the reason: excluded nodes, A not float32, B not a constant
// float32 matrix (or an empty one), non-finite weights. Everything else stays as it was.
#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "check/checker.h"
#include "ops/attr_spec.h"
#include "ops/op_registry.h"
#include "opt/quantize.h"
#include "opt/rewrite_util.h"

namespace nee::quant {

namespace {

using opt::GraphEditor;

constexpr int kLevels = 15;  // 4 bits: q in [0, 15]

struct BlockParams {
  float scale = 0;
  uint8_t zero_point = 0;
};

// The scale and zero point of one block's values (padding zeros included).
BlockParams BlockParamsOf(const float* values, int64_t count) {
  float lo = 0, hi = 0;  // the range is widened to hold 0
  for (int64_t i = 0; i < count; ++i) {
    lo = std::min(lo, values[i]);
    hi = std::max(hi, values[i]);
  }
  BlockParams p;
  p.scale = (hi - lo) / static_cast<float>(kLevels);
  const float zp = p.scale != 0.f ? 0.f - lo / p.scale : lo;
  p.zero_point = static_cast<uint8_t>(zp < 0.f ? 0.f : zp > kLevels ? kLevels : std::round(zp));
  return p;
}

uint8_t QuantizeValue(float w, float reciprocal_scale, uint8_t zero_point) {
  const float q = std::round(w * reciprocal_scale + static_cast<float>(zero_point));
  return static_cast<uint8_t>(std::clamp(q, 0.f, static_cast<float>(kLevels)));
}

void SetNibble(uint8_t* bytes, int64_t index, uint8_t value) {
  uint8_t& byte = bytes[index / 2];
  byte = (index & 1) ? static_cast<uint8_t>((byte & 0x0F) | (value << 4)) : static_cast<uint8_t>((byte & 0xF0) | value);
}

}  // namespace

Status QuantizeWeightsInt4(const Tensor& w, int64_t block_size, Int4Weights* out) {
  if (!w.defined() || w.dtype() != DataType::kFloat || w.rank() != 2)
    return InvalidArgument("weights to quantize must be a float32 matrix, got " + w.Describe());
  if (block_size < 16 || (block_size & (block_size - 1)) != 0)
    return InvalidArgument("the int4 block size must be a power of two >= 16, got " + std::to_string(block_size));
  const int64_t k = w.dim(0), n = w.dim(1);
  const int64_t blocks = (k + block_size - 1) / block_size, blob = block_size / 2, zp_row = (blocks + 1) / 2;
  const float* src = w.data<float>();
  for (int64_t i = 0; i < k * n; ++i)
    if (!std::isfinite(src[i])) return InvalidArgument("a weight is NaN or infinite");
  NEE_ASSIGN_OR_RETURN(out->b, Tensor::Allocate(DataType::kUint8, {n, blocks, blob}));
  NEE_ASSIGN_OR_RETURN(out->scales, Tensor::Allocate(DataType::kFloat, {n, blocks}));
  NEE_ASSIGN_OR_RETURN(out->zero_points, Tensor::Allocate(DataType::kUint8, {n, zp_row}));
  uint8_t* b = out->b.data<uint8_t>();
  float* scales = out->scales.data<float>();
  uint8_t* zps = out->zero_points.data<uint8_t>();
  std::vector<float> block(static_cast<size_t>(block_size));
  for (int64_t col = 0; col < n; ++col) {
    if (blocks % 2) zps[col * zp_row + zp_row - 1] = 0x80;  // the unused high nibble: 8
    for (int64_t blk = 0; blk < blocks; ++blk) {
      std::fill(block.begin(), block.end(), 0.f);
      const int64_t k0 = blk * block_size, count = std::min(block_size, k - k0);
      for (int64_t i = 0; i < count; ++i) block[static_cast<size_t>(i)] = src[(k0 + i) * n + col];
      const BlockParams p = BlockParamsOf(block.data(), block_size);
      const float reciprocal = p.scale != 0.f ? 1.f / p.scale : 0.f;
      scales[col * blocks + blk] = p.scale;
      SetNibble(zps + col * zp_row, blk, p.zero_point);
      uint8_t* bytes = b + (col * blocks + blk) * blob;
      for (int64_t i = 0; i < block_size; ++i)
        SetNibble(bytes, i, QuantizeValue(block[static_cast<size_t>(i)], reciprocal, p.zero_point));
    }
  }
  return Status::Ok();
}

Status QuantizeInt4(Model& model, const QuantizeOptions& options, QuantizeReport* report) {
  if (options.block_size < 16 || (options.block_size & (options.block_size - 1)) != 0)
    return InvalidArgument("--block-size must be a power of two >= 16 (e.g. 32, 64, 128), got " +
                           std::to_string(options.block_size));
  BindAttrDeclarations(model);
  NEE_ASSIGN_OR_RETURN(CheckedGraph checked, CheckModel(model, OpRegistry::Global()));
  GraphEditor ed(model.graph, checked);
  const std::unordered_set<std::string> excluded(options.exclude.begin(), options.exclude.end());
  struct Quantized {
    std::string b, scales, zero_points;
    int64_t k = 0, n = 0;
  };
  std::unordered_map<std::string, Quantized> done;  // by float initializer name
  std::vector<std::string> replaced;
  for (size_t index = 0; index < model.graph.nodes.size(); ++index) {
    const Node& node = ed.node(index);
    if (!opt::IsOp(node, "MatMul")) continue;
    const std::string label = node.Describe();
    auto skip = [&](const std::string& why) { report->skipped.push_back(label + ": " + why); };
    if (const std::string why = WhyNotCandidateNode(node, excluded); !why.empty()) {
      skip(why);
      continue;
    }
    const std::string a = node.inputs[0], b = node.inputs[1];
    Tensor w;
    if (const std::string why = WhyNotFloatTimesConstantMatrix(ed, a, b, &w); !why.empty()) {
      skip(why);
      continue;
    }
    if (w.num_elements() == 0) {  // MatMulNBits needs K and N of at least 1
      skip("B '" + b + "' is empty");
      continue;
    }
    auto it = done.find(b);
    if (it == done.end()) {
      Int4Weights q;
      Status st = QuantizeWeightsInt4(w, options.block_size, &q);
      if (!st.ok()) {
        skip("B '" + b + "': " + st.message());
        continue;
      }
      Quantized names;
      names.k = w.dim(0);
      names.n = w.dim(1);
      names.b = ed.AddInitializer(b + "_Q4", std::move(q.b));
      names.scales = ed.AddInitializer(b + "_scales", std::move(q.scales));
      names.zero_points = ed.AddInitializer(b + "_zero_points", std::move(q.zero_points));
      it = done.emplace(b, std::move(names)).first;
    }
    const Quantized& qw = it->second;
    report->converted.push_back(node.name.empty() ? node.outputs[0] : node.name);
    replaced.push_back(b);
    ed.RewriteAs(index, opt::kMicrosoftDomain, "MatMulNBits", {a, qw.b, qw.scales, qw.zero_points},
                 {opt::IntAttr("K", qw.k), opt::IntAttr("N", qw.n), opt::IntAttr("bits", 4),
                  opt::IntAttr("block_size", options.block_size)});
  }
  ed.CommitDroppingInitializers(replaced);
  if (!report->converted.empty() && model.OpsetVersion(opt::kMicrosoftDomain) < 0)
    model.opset_imports.push_back({opt::kMicrosoftDomain, 1});
  return Status::Ok();
}

}  // namespace nee::quant
