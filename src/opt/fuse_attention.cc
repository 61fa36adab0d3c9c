// Level-2 fusion of multi-head attention, as PyTorch exports it, into nee's
// ai.nee ScaledDotProductAttention (ops/attention_sdpa.h):
//
//   Qh = Transpose(Reshape(q, [B,S,N,H]), [0,2,1,3])     K: [0,2,3,1]  (Kt, heads of K transposed)
//   scores = MatMul(Qh [* c1], Kt) [* c2]                 c1, c2 scalar constants (Mul, or Div by them)
//   scores = Add(scores, M) | Where(C, F, scores)         optional: M broadcastable; C constant, F <= -1e30
//   out = Reshape(Transpose(MatMul(Softmax(scores, -1), Vh), [0,2,1,3]), ...)
//
// or the same in 3-D with the batch folded away (perms [1,0,2], K [1,2,0]),
// as torch's nn.MultiheadAttention writes it for one image. The fused node
// reads q, k and v as [B, S, N*H] (their Reshapes now produce that shape,
// which is usually q's own, so eliminate-noops drops them) and writes
// [B, S, N*Hv], which is the bytes of the Transpose's output: every reader of
// that must be a Reshape. Its kernel never materializes the [B, N, S, L]
// scores, nor the transposed copies of Q, K and V.
//
// The masked Where becomes an additive bias (0 where a score is kept, F
// elsewhere): with F <= -1e30 a masked score rounds to F (or -inf) exactly as
// in the Where, so the softmax is unchanged. A constant mask (Where's or
// Add's) of GPT-2's causal pattern becomes the attribute causal = 1 instead,
// whose kernel skips the masked triangle (see IsCausalBias). The scales
// become one factor applied to Q·Kᵀ; for powers of two (1/sqrt(64) = 1/8)
// that is exact.
// Conditions: float32, static shapes, every intermediate value read only by
// the next node of the pattern. When q, k and v are column ranges of one
// tensor (a Split or Slices of a fused projection), the node reads that
// tensor once instead, key and value absent (see MatchPackedQkv); three
// projections of one x by constant matrices become one such projection
// first (MatchProjectedQkv; MatchQuantProjectedQkv for three dynamically
// quantized ones, com.microsoft MatMulIntegerToFloat).
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "base/mapped_file.h"
#include "ops/attention_sdpa.h"
#include "opt/column_slice.h"
#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// The Reshape and Transpose that split q (or k, v) into heads.
struct HeadSplit {
  size_t reshape = 0, transpose = 0;
  std::vector<int64_t> dims;  // [B, S, N, H]; B = 1 for the 3-D form
};

// The producer of `name` when it is the only reader-visible node of its kind
// and op, with opset at least `min_opset`; -1 otherwise.
int64_t ProducerOp(GraphEditor& ed, const std::string& name, const char* op, int64_t min_opset = 1) {
  int64_t p = ed.Producer(name);
  if (p < 0 || opt::SoleConsumer(ed, name) < 0) return -1;
  const Node& n = ed.node(static_cast<size_t>(p));
  if (!opt::IsOp(n, op) || n.outputs.size() != 1 || ed.checked().opsets[static_cast<size_t>(p)] < min_opset)
    return -1;
  return p;
}

bool HasPerm(const Node& transpose, const std::vector<int64_t>& perm) {
  if (opt::HasOtherAttributes(transpose, {"perm"})) return false;
  auto p = transpose.GetInts("perm");
  return p.ok() && p.value() == perm;
}

// `name` = Transpose(Reshape(x, s), perm) with perm the head split of Q/V
// (`key` false) or the transposed one of K, of rank `rank` (3 or 4).
bool MatchHeadSplit(GraphEditor& ed, const std::string& name, bool key, size_t rank, HeadSplit* out) {
  int64_t t = ProducerOp(ed, name, "Transpose");
  if (t < 0) return false;
  std::vector<int64_t> perm;
  if (rank == 4) perm = key ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3};
  else perm = key ? std::vector<int64_t>{1, 2, 0} : std::vector<int64_t>{1, 0, 2};
  const Node& tn = ed.node(static_cast<size_t>(t));
  if (tn.inputs.size() != 1 || !HasPerm(tn, perm)) return false;
  int64_t r = ProducerOp(ed, tn.inputs[0], "Reshape", 5);
  if (r < 0 || opt::HasOtherAttributes(ed.node(static_cast<size_t>(r)), {"allowzero"})) return false;
  std::vector<int64_t> dims;
  if (!opt::StaticDims(ed.TensorType(tn.inputs[0]), &dims) || dims.size() != rank) return false;
  if (ed.TensorType(tn.inputs[0])->elem_type != DataType::kFloat) return false;
  if (rank == 3) dims.insert(dims.begin(), 1);
  for (int64_t d : dims)
    if (d <= 0) return false;
  *out = HeadSplit{static_cast<size_t>(r), static_cast<size_t>(t), dims};
  return true;
}

// `name` = Mul(x, c), Mul(c, x) or Div(x, c) with a scalar constant c: the
// node, x and the factor it applies.
bool MatchScale(GraphEditor& ed, const std::string& name, int64_t* node, std::string* x, double* factor) {
  int64_t p = ed.Producer(name);
  if (p < 0 || opt::SoleConsumer(ed, name) < 0 || ed.checked().opsets[static_cast<size_t>(p)] < 7) return false;
  const Node& n = ed.node(static_cast<size_t>(p));
  const bool div = opt::IsOp(n, "Div");
  if ((!div && !opt::IsOp(n, "Mul")) || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  for (size_t side = div ? 1 : 0; side < 2; ++side) {
    float c = 0;
    if (!opt::ScalarConstant(ed, n.inputs[side], &c) || ed.Constant(n.inputs[side]).rank() > 1) continue;
    if (c == 0 || !std::isfinite(c)) return false;
    *node = p;
    *x = n.inputs[1 - side];
    *factor = div ? 1.0 / c : c;
    return true;
  }
  return false;
}

// Whether static `dims` broadcast into `target` without enlarging it.
bool BroadcastsInto(const std::vector<int64_t>& dims, const std::vector<int64_t>& target) {
  if (dims.size() > target.size()) return false;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = dims[dims.size() - 1 - k];
    if (d != 1 && d != target[target.size() - 1 - k]) return false;
  }
  return true;
}

// The masking step before the softmax, if any: the node, the scores it
// reads, and the bias the fused node adds (empty when none).
struct Mask {
  int64_t node = -1;
  std::string scores, bias;
  Tensor bias_constant;  // for a Where: the bias to add as an initializer once the whole pattern matched
};

// Add(scores, M) with M float32 of static dims that broadcast into `target`;
// either side may be the mask (the rest of the match decides).
void AddMaskCandidates(GraphEditor& ed, int64_t p, const std::vector<int64_t>& target, std::vector<Mask>* out) {
  const Node& n = ed.node(static_cast<size_t>(p));
  if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1] || !n.attributes.empty()) return;
  for (size_t side = 0; side < 2; ++side) {
    const std::string& m = n.inputs[side];
    const TypeInfo* t = ed.TensorType(m);
    std::vector<int64_t> dims;
    if (!opt::IsFloatWithRank(t) || !opt::StaticDims(t, &dims) || !BroadcastsInto(dims, target)) continue;
    if (ed.Producer(n.inputs[1 - side]) < 0) continue;  // the scores come from the pattern
    out->push_back(Mask{p, n.inputs[1 - side], m, Tensor()});
  }
}

// Where(C, F, scores) or Where(C, scores, F), C a constant bool tensor that
// broadcasts into `target` and F a scalar constant <= -1e30: the bias
// C ? F : 0 (or C ? 0 : F) as a new initializer.
void WhereMaskCandidates(GraphEditor& ed, int64_t p, const std::vector<int64_t>& target, std::vector<Mask>* out) {
  const Node& n = ed.node(static_cast<size_t>(p));
  if (n.inputs.size() != 3) return;
  Tensor cond = ed.Constant(n.inputs[0]);
  if (!cond.defined() || cond.dtype() != DataType::kBool || !BroadcastsInto(cond.dims(), target)) return;
  for (size_t side = 1; side < 3; ++side) {
    float fill = 0;
    if (!opt::ScalarConstant(ed, n.inputs[side], &fill) || !(fill <= -1e30f)) continue;
    const std::string& scores = n.inputs[3 - side];
    if (ed.Producer(scores) < 0) continue;
    Result<Tensor> allocated = Tensor::Allocate(DataType::kFloat, cond.dims());
    if (!allocated.ok()) return;
    Tensor bias = std::move(allocated.value());
    const bool* c = cond.data<bool>();
    float* b = bias.data<float>();
    const bool fill_when = side == 1;  // Where(C, F, s): F where C holds
    for (int64_t i = 0; i < cond.num_elements(); ++i) b[i] = c[i] == fill_when ? fill : 0.f;
    out->push_back(Mask{p, scores, n.outputs[0] + "_bias", std::move(bias)});
    return;
  }
}

// The readings of the softmax input: masked (Add or Where) in each possible
// way, then unmasked.
std::vector<Mask> MaskCandidates(GraphEditor& ed, const std::string& logits, const std::vector<int64_t>& target) {
  std::vector<Mask> out;
  int64_t p = ed.Producer(logits);
  if (p >= 0 && opt::SoleConsumer(ed, logits) >= 0 && ed.node(static_cast<size_t>(p)).outputs.size() == 1) {
    const Node& n = ed.node(static_cast<size_t>(p));
    const int64_t opset = ed.checked().opsets[static_cast<size_t>(p)];
    if (opt::IsOp(n, "Add") && opset >= 7) AddMaskCandidates(ed, p, target, &out);
    if (opt::IsOp(n, "Where") && opset >= 9) WhereMaskCandidates(ed, p, target, &out);
  }
  out.push_back(Mask{-1, logits, "", Tensor()});
  return out;
}

// A Softmax over the last axis of a rank-`rank` input (for opset < 13 the
// input is coerced to 2-D at `axis`, which is the same when axis is the last).
bool LastAxisSoftmax(GraphEditor& ed, size_t index, size_t rank) {
  const Node& n = ed.node(index);
  if (opt::HasOtherAttributes(n, {"axis"}) || n.outputs.size() != 1) return false;
  auto axis = n.GetInt("axis", ed.checked().opsets[index] >= 13 ? -1 : 1);
  return axis.ok() && (axis.value() == -1 || axis.value() == static_cast<int64_t>(rank) - 1);
}

// Everything the rewrite needs, found by walking back and forth from a Softmax.
struct AttentionMatch {
  HeadSplit q, k, v;
  std::vector<size_t> removed;  // scales, mask, MatMuls, the softmax
  std::string bias;
  Tensor bias_constant;  // when defined, `bias` is the name to give it
  double scale = 1.0;
  size_t out_transpose = 0;
};

// MatMul(Qh [scaled], Kt) [scaled] producing `x`.
bool MatchProduct(GraphEditor& ed, std::string x, size_t rank, AttentionMatch* m) {
  int64_t node = -1;
  double factor = 1.0;
  if (MatchScale(ed, x, &node, &x, &factor)) {
    m->removed.push_back(static_cast<size_t>(node));
    m->scale *= factor;
  }
  int64_t mm = ProducerOp(ed, x, "MatMul");
  if (mm < 0 || ed.node(static_cast<size_t>(mm)).inputs.size() != 2) return false;
  m->removed.push_back(static_cast<size_t>(mm));
  std::string qh = ed.node(static_cast<size_t>(mm)).inputs[0];
  if (MatchScale(ed, qh, &node, &qh, &factor)) {
    m->removed.push_back(static_cast<size_t>(node));
    m->scale *= factor;
  }
  return MatchHeadSplit(ed, qh, false, rank, &m->q) &&
         MatchHeadSplit(ed, ed.node(static_cast<size_t>(mm)).inputs[1], true, rank, &m->k);
}

// The scores side: the product, optionally masked, feeding softmax `sm`.
bool MatchScores(GraphEditor& ed, size_t sm, size_t rank, AttentionMatch* m) {
  const std::string& x = ed.node(sm).inputs[0];
  std::vector<int64_t> sdims;
  if (!opt::StaticDims(ed.TensorType(x), &sdims) || sdims.size() != rank) return false;
  for (Mask& mask : MaskCandidates(ed, x, sdims)) {
    AttentionMatch trial = *m;
    if (!MatchProduct(ed, mask.scores, rank, &trial)) continue;
    if (mask.node >= 0) trial.removed.push_back(static_cast<size_t>(mask.node));
    trial.bias = mask.bias;
    trial.bias_constant = std::move(mask.bias_constant);
    *m = std::move(trial);
    return true;
  }
  return false;
}

// The values side: MatMul(softmax, Vh) -> Transpose back, read only by Reshapes.
bool MatchContext(GraphEditor& ed, size_t sm, size_t rank, AttentionMatch* m) {
  const std::string& p = ed.node(sm).outputs[0];
  int64_t mm = opt::SoleConsumer(ed, p);
  if (mm < 0 || !opt::IsOp(ed.node(static_cast<size_t>(mm)), "MatMul")) return false;
  const Node& mmn = ed.node(static_cast<size_t>(mm));
  if (mmn.inputs.size() != 2 || mmn.inputs[0] != p || mmn.outputs.size() != 1) return false;
  if (!MatchHeadSplit(ed, mmn.inputs[1], false, rank, &m->v)) return false;
  int64_t t = opt::SoleConsumer(ed, mmn.outputs[0]);
  if (t < 0 || !opt::IsOp(ed.node(static_cast<size_t>(t)), "Transpose")) return false;
  const Node& tn = ed.node(static_cast<size_t>(t));
  if (!HasPerm(tn, rank == 4 ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{1, 0, 2})) return false;
  const std::string& out = tn.outputs[0];
  if (tn.outputs.size() != 1 || ed.IsPinned(out) || ed.Uses(out).empty()) return false;
  for (const opt::Use& use : ed.Uses(out))
    if (!opt::IsOp(ed.node(use.node), "Reshape") || use.input != 0) return false;
  m->removed.push_back(static_cast<size_t>(mm));
  m->out_transpose = static_cast<size_t>(t);
  return true;
}

// Heads agree: q [B,S,N,H], k [B,L,N,H], v [B,L,N,Hv].
bool GeometryAgrees(const AttentionMatch& m) {
  const auto &q = m.q.dims, &k = m.k.dims, &v = m.v.dims;
  return q[0] == k[0] && q[0] == v[0] && q[2] == k[2] && q[2] == v[2] && q[3] == k[3] && k[1] == v[1];
}

// Whether `bias`, read as [B, N, S, L], is a causal mask the kernel can apply
// by skipping keys: 0 where key l <= s + L - S, at most -1e30 (or -inf)
// elsewhere, the same for every batch and head (leading dims 1), S <= L. A
// masked score then rounds to the fill, whose e^x is exactly 0, so the
// kernel's probability 0 for an unseen key is what the mask gives.
bool IsCausalBias(const Tensor& bias, int64_t S, int64_t L) {
  if (!bias.defined() || bias.dtype() != DataType::kFloat || bias.rank() < 2 || bias.rank() > 4 || S > L)
    return false;
  for (int64_t axis = 0; axis + 2 < bias.rank(); ++axis)
    if (bias.dim(axis) != 1) return false;
  if (bias.dim(bias.rank() - 2) != S || bias.dim(bias.rank() - 1) != L) return false;
  const float* b = bias.data<float>();
  for (int64_t s = 0; s < S; ++s)
    for (int64_t l = 0; l < L; ++l) {
      const float x = b[s * L + l];
      if (l <= s + L - S ? x != 0.f : !(x <= -1e30f)) return false;
    }
  return true;
}

// Makes a head split's Reshape produce [B, S, N*H] and drops its Transpose.
void Unsplit(GraphEditor& ed, const HeadSplit& h) {
  const std::vector<int64_t> shape = {h.dims[0], h.dims[1], h.dims[2] * h.dims[3]};
  const std::string name = ed.AddInitializer(ed.node(h.reshape).outputs[0] + "_bsd",
                                             Tensor::FromVector<int64_t>(shape, {3}));
  ed.SetInput(h.reshape, 1, name);
  ed.RemoveNode(h.transpose);
}

// Where q, k and v (what their head-split Reshapes read) lie side by side in
// one tensor x [..., 3D] as columns [0, D), [D, 2D), [2D, 3D): the outputs of
// a Split of x's last axis (GPT-2's c_attn), or three Slices of it (torch's
// nn.MultiheadAttention, ViT). The fused node then reads x itself, and the
// Split or Slices (copies of x) go.
struct PackedQkv {
  std::string x;
  std::vector<size_t> nodes;  // the Split, or the three Slices
};

// The static dims of float32 `x` when its last axis is 3 * width and its rows number rows.
bool PackedSourceFits(GraphEditor& ed, const std::string& x, int64_t rows, int64_t width) {
  std::vector<int64_t> dims;
  if (!opt::IsFloatWithRank(ed.TensorType(x)) || !opt::StaticDims(ed.TensorType(x), &dims) || dims.empty())
    return false;
  int64_t leading = 1;
  for (size_t i = 0; i + 1 < dims.size(); ++i) leading *= dims[i];
  return dims.back() == 3 * width && leading == rows;
}

// Split(x) along its last axis into (q, k, v), each of `width` columns.
bool MatchSplitQkv(GraphEditor& ed, const std::string (&parts)[3], int64_t width, PackedQkv* out) {
  const int64_t p = ed.Producer(parts[0]);
  if (p < 0) return false;
  const Node& n = ed.node(static_cast<size_t>(p));
  const int64_t opset = ed.checked().opsets[static_cast<size_t>(p)];
  if (!opt::IsOp(n, "Split") || n.outputs.size() != 3 || n.inputs.empty() ||
      opt::HasOtherAttributes(n, {"axis", "split", "num_outputs"}))
    return false;
  for (size_t i = 0; i < 3; ++i)
    if (n.outputs[i] != parts[i]) return false;
  const TypeInfo* t = ed.TensorType(n.inputs[0]);
  if (!opt::IsFloatWithRank(t)) return false;
  const int64_t rank = static_cast<int64_t>(t->shape->size());
  auto axis = n.GetInt("axis", 0);
  if (!axis.ok() || (axis.value() != -1 && axis.value() != rank - 1)) return false;
  const std::vector<int64_t> equal = {width, width, width};  // x's last axis is 3 * width (PackedSourceFits)
  std::vector<int64_t> sizes = equal;                          // no sizes given: an equal split
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    if (opset < 13 || !opt::ConstantInt64s(ed, n.inputs[1], &sizes)) return false;
  } else if (opset < 13) {
    auto attr = n.GetInts("split", equal);
    if (!attr.ok()) return false;
    sizes = attr.value();
  }
  if (sizes != equal) return false;
  *out = PackedQkv{n.inputs[0], {static_cast<size_t>(p)}};
  return true;
}

bool MatchSlicesQkv(GraphEditor& ed, const std::string (&parts)[3], int64_t width, PackedQkv* out) {
  PackedQkv found;
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t p = ed.Producer(parts[i]);
    opt::ColumnSlice slice;
    if (p < 0 || !opt::MatchColumnSlice(ed, static_cast<size_t>(p), &slice)) return false;
    if ((i > 0 && slice.source != found.x) || slice.begin != i * width || slice.end != (i + 1) * width) return false;
    found.x = slice.source;
    found.nodes.push_back(static_cast<size_t>(p));
  }
  *out = std::move(found);
  return true;
}

bool MatchPackedQkv(GraphEditor& ed, const AttentionMatch& m, PackedQkv* out) {
  const HeadSplit* splits[3] = {&m.q, &m.k, &m.v};
  std::string parts[3];
  for (size_t i = 0; i < 3; ++i) {
    parts[i] = ed.node(splits[i]->reshape).inputs[0];
    if (opt::SoleConsumer(ed, parts[i]) != static_cast<int64_t>(splits[i]->reshape)) return false;
  }
  const std::vector<int64_t>& q = m.q.dims;  // [B, S, N, H]
  if (m.v.dims[3] != q[3] || m.k.dims[1] != q[1]) return false;  // self-attention, Hv = H
  const int64_t width = q[2] * q[3];
  if (!MatchSplitQkv(ed, parts, width, out) && !MatchSlicesQkv(ed, parts, width, out)) return false;
  return PackedSourceFits(ed, out->x, q[0] * q[1], width);
}

// q, k or v as [Add(] MatMul(x, W) [, b)]: W a constant float32 [K, width],
// b a constant float32 [width], each value read only by the next step.
struct Projection {
  std::string x;
  size_t matmul = 0;
  int64_t add = -1;  // -1: no bias
  Tensor w, b;
};

bool MatchProjection(GraphEditor& ed, const std::string& name, int64_t width, Projection* out) {
  int64_t p = ed.Producer(name);
  if (p < 0) return false;
  Projection proj;
  const Node* n = &ed.node(static_cast<size_t>(p));
  if (opt::IsOp(*n, "Add") && ed.checked().opsets[static_cast<size_t>(p)] >= 7 && n->inputs.size() == 2 &&
      n->attributes.empty()) {
    for (size_t side = 0; side < 2 && proj.add < 0; ++side) {
      const Tensor b = ed.Constant(n->inputs[side]);
      const int64_t mm = ed.Producer(n->inputs[1 - side]);
      if (!opt::IsFloatTensor(b) || b.rank() != 1 || b.dim(0) != width || mm < 0 ||
          opt::SoleConsumer(ed, n->inputs[1 - side]) != p)
        continue;
      proj.add = p;
      proj.b = b;
      p = mm;
    }
    if (proj.add < 0) return false;
    n = &ed.node(static_cast<size_t>(p));
  }
  if (!opt::IsOp(*n, "MatMul") || n->inputs.size() != 2 || n->outputs.size() != 1) return false;
  proj.w = ed.Constant(n->inputs[1]);
  if (!opt::IsFloatTensor(proj.w) || proj.w.rank() != 2 || proj.w.dim(1) != width) return false;
  proj.x = n->inputs[0];
  proj.matmul = static_cast<size_t>(p);
  *out = std::move(proj);
  return true;
}

// A float32 tensor of `dims` in its own anonymous mapping, unmapped when its
// last owner lets go; undefined when it cannot be mapped. For the merged
// q/k/v weights: a kernel packs them once and drops them, and a block of the
// heap or of BufferPool (which caches freed blocks for later runs, up to
// 128 MB) would stay resident after that: BERT-base's twelve merged weights,
// 85 MB, did (peak RSS 473 -> 581 MB when the projections were merged).
Tensor AllocateUnpooled(DataType type, std::vector<int64_t> dims) {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  const size_t bytes = StorageBytes(type, std::max<int64_t>(count, 1));
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Tensor();
  std::shared_ptr<void> owner(p, [bytes](void* q) { ::munmap(q, bytes); });
  return Tensor::View(type, std::move(dims), p, std::move(owner));
}

// [a | b | c] along the last axis of three tensors of one fixed-size element
// type (float32, or the int8 weights of quantized projections) and equal
// dims; undefined when it cannot be allocated. The parts' pages of the mapped
// model file are let go once copied (they are read again from the file if
// the parts ever are), so the copy does not sit beside them.
Tensor ConcatColumns(const Tensor* parts[3]) {
  std::vector<int64_t> dims = parts[0]->dims();
  const int64_t width = dims.back(), rows = parts[0]->num_elements() / std::max<int64_t>(width, 1);
  dims.back() = 3 * width;
  Tensor out = AllocateUnpooled(parts[0]->dtype(), dims);
  if (!out.defined()) return Tensor();
  const size_t row_bytes = StorageBytes(parts[0]->dtype(), width);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < 3; ++i)
      std::memcpy(static_cast<char*>(out.raw_data()) + (r * 3 + i) * row_bytes,
                  static_cast<const char*>(parts[i]->raw_data()) + r * row_bytes, row_bytes);
  for (int64_t i = 0; i < 3; ++i) ReleaseFileBackedPages(parts[i]->raw_data(), parts[i]->byte_size());
  return out;
}

// The width of q, k and v (heads x head size) when they are a
// self-attention's three projections (Hv = H), each read only by its head
// split and matched by `match` into proj[i] (MatchProjection or
// MatchQuantProjection); 0 when they are not.
template <typename Proj, typename MatchFn>
int64_t MatchThreeProjections(GraphEditor& ed, const AttentionMatch& m, MatchFn match, Proj proj[3]) {
  const HeadSplit* splits[3] = {&m.q, &m.k, &m.v};
  const std::vector<int64_t>& q = m.q.dims;
  if (m.v.dims[3] != q[3] || m.k.dims[1] != q[1]) return 0;
  const int64_t width = q[2] * q[3];
  for (size_t i = 0; i < 3; ++i) {
    const std::string& part = ed.node(splits[i]->reshape).inputs[0];
    if (opt::SoleConsumer(ed, part) != static_cast<int64_t>(splits[i]->reshape) || !match(ed, part, width, &proj[i]))
      return 0;
  }
  return width;
}

// Whether x, the projections' input, has static dims ending in `depth` (the
// weights' rows) whose other dims hold the attention's B x S rows.
bool ProjectedRowsAgree(GraphEditor& ed, const AttentionMatch& m, const std::string& x, int64_t depth) {
  std::vector<int64_t> xdims;
  if (!opt::StaticDims(ed.TensorType(x), &xdims) || xdims.empty() || xdims.back() != depth) return false;
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < xdims.size(); ++i) rows *= xdims[i];
  return rows == m.q.dims[0] * m.q.dims[1];
}

// q, k and v projected from one x by three constant matrices (BERT's query,
// key and value Linear layers): one MatMul by [Wq | Wk | Wv] (+ [bq | bk | bv])
// writes them side by side for the packed node. Each column of a product is
// the same dot product in the same order as before, so the values do not
// change, and one GEMM three times as wide runs (and splits among threads)
// better than three. `dropped` gets the old weights and biases.
bool MatchProjectedQkv(GraphEditor& ed, const AttentionMatch& m, std::vector<std::string>* dropped,
                       PackedQkv* out) {
  Projection proj[3];
  if (MatchThreeProjections(ed, m, MatchProjection, proj) == 0) return false;
  for (const Projection& p : proj)
    if (p.x != proj[0].x || (p.add < 0) != (proj[0].add < 0) || p.w.dim(0) != proj[0].w.dim(0)) return false;
  if (!ProjectedRowsAgree(ed, m, proj[0].x, proj[0].w.dim(0))) return false;
  const Tensor* ws[3] = {&proj[0].w, &proj[1].w, &proj[2].w};
  const Tensor* bs[3] = {&proj[0].b, &proj[1].b, &proj[2].b};
  Tensor weight = ConcatColumns(ws), bias = proj[0].add >= 0 ? ConcatColumns(bs) : Tensor();
  if (!weight.defined() || (proj[0].add >= 0 && !bias.defined())) return false;
  const std::string base = ed.node(m.out_transpose).name + "_qkv";
  const std::string w = ed.AddInitializer(base + "_weight", std::move(weight));
  std::string product = ed.FreshName(base + "_matmul");
  ed.InsertBefore(m.out_transpose, opt::MakeNode(product, "MatMul", {proj[0].x, w}, {product}));
  for (const Projection& p : proj) {
    dropped->push_back(ed.node(p.matmul).inputs[1]);
    if (p.add >= 0)
      for (const std::string& in : ed.node(static_cast<size_t>(p.add)).inputs)
        if (ed.Producer(in) < 0) dropped->push_back(in);
    ed.RemoveNode(p.matmul);
    if (p.add >= 0) ed.RemoveNode(static_cast<size_t>(p.add));
  }
  if (proj[0].add >= 0) {
    const std::string b = ed.AddInitializer(base + "_bias", std::move(bias));
    const std::string sum = ed.FreshName(base + "_add");
    ed.InsertBefore(m.out_transpose, opt::MakeNode(sum, "Add", {product, b}, {sum}));
    product = sum;
  }
  *out = PackedQkv{product, {}};
  return true;
}

// q, k or v as com.microsoft MatMulIntegerToFloat(a, W, a_scale, w_scale,
// a_zp, w_zp[, b]) (opt/fuse_quant_matmul.cc's dynamically quantized
// Linear): W a constant 8-bit [K, width], w_scale a constant float32 and w_zp
// a constant zero point (each one value or [width]), b a constant float32
// [width]; a, a_scale and a_zp whatever they are (compared between the three).
struct QuantProjection {
  size_t node = 0;
  std::vector<std::string> shared;  // a, a_scale, a_zp ("" when absent)
  Tensor w, w_scale, w_zp, b;       // w_zp, b undefined when absent
};

bool MatchQuantProjection(GraphEditor& ed, const std::string& name, int64_t width, QuantProjection* out) {
  const int64_t p = ed.Producer(name);
  if (p < 0) return false;
  const Node& n = ed.node(static_cast<size_t>(p));
  if (n.domain != opt::kMicrosoftDomain || n.op_type != "MatMulIntegerToFloat" || n.inputs.size() < 4 ||
      n.inputs.size() > 7 || n.outputs.size() != 1 || !n.attributes.empty())
    return false;
  QuantProjection proj;
  proj.node = static_cast<size_t>(p);
  proj.shared = {n.inputs[0], n.inputs[2], n.HasInput(4) ? n.inputs[4] : std::string()};
  proj.w = ed.Constant(n.inputs[1]);
  proj.w_scale = ed.Constant(n.inputs[3]);
  if (!proj.w.defined() || (proj.w.dtype() != DataType::kInt8 && proj.w.dtype() != DataType::kUint8) ||
      proj.w.rank() != 2 || proj.w.dim(1) != width || !opt::IsFloatTensor(proj.w_scale) || proj.w_scale.rank() > 1 ||
      (proj.w_scale.num_elements() != 1 && proj.w_scale.num_elements() != width))
    return false;
  if (n.HasInput(5)) {
    proj.w_zp = ed.Constant(n.inputs[5]);
    if (!proj.w_zp.defined() || proj.w_zp.dtype() != proj.w.dtype() || proj.w_zp.rank() > 1 ||
        (proj.w_zp.num_elements() != 1 && proj.w_zp.num_elements() != width))
      return false;
  }
  if (n.HasInput(6)) {
    proj.b = ed.Constant(n.inputs[6]);
    if (!opt::IsFloatTensor(proj.b) || proj.b.rank() != 1 || proj.b.dim(0) != width) return false;
  }
  *out = std::move(proj);
  return true;
}

// Three per-column inputs (scales or zero points: one value or `width` each)
// as one for the merged product: the one value when all three agree bitwise,
// else each spread over its columns, [3 * width].
Tensor MergePerColumn(const Tensor* parts[3], int64_t width) {
  const size_t elem = StorageBytes(parts[0]->dtype(), 1);
  bool same = true;
  for (size_t i = 0; i < 3; ++i)
    same = same && parts[i]->num_elements() == 1 &&
           std::memcmp(parts[i]->raw_data(), parts[0]->raw_data(), elem) == 0;
  if (same) return *parts[0];
  Tensor out = AllocateUnpooled(parts[0]->dtype(), {3 * width});
  if (!out.defined()) return Tensor();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < width; ++j)
      std::memcpy(static_cast<char*>(out.raw_data()) + (i * width + j) * static_cast<int64_t>(elem),
                  static_cast<const char*>(parts[i]->raw_data()) +
                      (parts[i]->num_elements() == 1 ? 0 : j) * static_cast<int64_t>(elem),
                  elem);
  return out;
}

// q, k and v as three MatMulIntegerToFloat of one quantized x (the query, key
// and value Linear layers of a dynamically quantized BERT): one
// MatMulIntegerToFloat by [Wq | Wk | Wv], its scales, zero points and biases
// side by side (one value where the three share it). Each column's integer
// sum, its scale a_scale * w_scale[j] and its bias are those of before, in the
// same order, so the values do not change; one GEMM three times as wide packs
// A once and splits among threads better. `dropped` gets the old constants.
bool MatchQuantProjectedQkv(GraphEditor& ed, const AttentionMatch& m, std::vector<std::string>* dropped,
                            PackedQkv* out) {
  QuantProjection proj[3];
  const int64_t width = MatchThreeProjections(ed, m, MatchQuantProjection, proj);
  if (width == 0) return false;
  for (const QuantProjection& p : proj)
    if (p.shared != proj[0].shared || p.w.dtype() != proj[0].w.dtype() || p.w.dim(0) != proj[0].w.dim(0) ||
        p.w_zp.defined() != proj[0].w_zp.defined() || p.b.defined() != proj[0].b.defined())
      return false;
  if (!ProjectedRowsAgree(ed, m, proj[0].shared[0], proj[0].w.dim(0))) return false;
  const Tensor* ws[3] = {&proj[0].w, &proj[1].w, &proj[2].w};
  const Tensor* scales[3] = {&proj[0].w_scale, &proj[1].w_scale, &proj[2].w_scale};
  const Tensor* zps[3] = {&proj[0].w_zp, &proj[1].w_zp, &proj[2].w_zp};
  const Tensor* bs[3] = {&proj[0].b, &proj[1].b, &proj[2].b};
  const bool has_zp = proj[0].w_zp.defined(), has_bias = proj[0].b.defined();
  Tensor weight = ConcatColumns(ws), scale = MergePerColumn(scales, width);
  Tensor zp = has_zp ? MergePerColumn(zps, width) : Tensor(), bias = has_bias ? ConcatColumns(bs) : Tensor();
  if (!weight.defined() || !scale.defined() || (has_zp && !zp.defined()) || (has_bias && !bias.defined()))
    return false;
  const std::string base = ed.node(m.out_transpose).name + "_qkv";
  std::vector<std::string> inputs = {proj[0].shared[0], ed.AddInitializer(base + "_weight", std::move(weight)),
                                     proj[0].shared[1], ed.AddInitializer(base + "_weight_scale", std::move(scale)),
                                     proj[0].shared[2],
                                     has_zp ? ed.AddInitializer(base + "_weight_zero_point", std::move(zp)) : "",
                                     has_bias ? ed.AddInitializer(base + "_bias", std::move(bias)) : ""};
  while (inputs.back().empty()) inputs.pop_back();
  for (const QuantProjection& p : proj) {
    const Node& n = ed.node(p.node);
    for (size_t i : {1, 3, 5, 6})
      if (n.HasInput(i) && ed.Producer(n.inputs[i]) < 0) dropped->push_back(n.inputs[i]);
    ed.RemoveNode(p.node);
  }
  const std::string product = ed.FreshName(base + "_matmul");
  Node mm = opt::MakeNode(product, "MatMulIntegerToFloat", inputs, {product});
  mm.domain = opt::kMicrosoftDomain;
  ed.InsertBefore(m.out_transpose, std::move(mm));
  *out = PackedQkv{product, {}};
  return true;
}

Status TryFuse(GraphEditor& ed, size_t index, std::vector<std::string>* dropped) {
  const Node& sm = ed.node(index);
  if (!opt::IsOp(sm, "Softmax") || sm.inputs.size() != 1) return Status::Ok();
  const TypeInfo* t = ed.TensorType(sm.inputs[0]);
  if (!opt::IsFloatWithRank(t) || (t->shape->size() != 3 && t->shape->size() != 4)) return Status::Ok();
  const size_t rank = t->shape->size();
  if (!LastAxisSoftmax(ed, index, rank)) return Status::Ok();
  AttentionMatch m;
  if (!MatchContext(ed, index, rank, &m) || !MatchScores(ed, index, rank, &m) || !GeometryAgrees(m))
    return Status::Ok();
  PackedQkv packed;
  std::vector<std::string> inputs;
  if (MatchPackedQkv(ed, m, &packed) || MatchProjectedQkv(ed, m, dropped, &packed) ||
      MatchQuantProjectedQkv(ed, m, dropped, &packed)) {
    for (const HeadSplit* h : {&m.q, &m.k, &m.v}) {
      ed.RemoveNode(h->transpose);
      ed.RemoveNode(h->reshape);
    }
    for (size_t n : packed.nodes) ed.RemoveNode(n);
    // x as [B, S, 3D]: usually its own shape (eliminate-noops drops the Reshape).
    const std::vector<int64_t> shape = {m.q.dims[0], m.q.dims[1], 3 * m.q.dims[2] * m.q.dims[3]};
    const std::string base = ed.node(m.out_transpose).name + "_qkv";
    const std::string shape_name = ed.AddInitializer(base + "_shape", Tensor::FromVector<int64_t>(shape, {3}));
    const std::string reshaped = ed.FreshName(base);
    ed.InsertBefore(m.out_transpose, opt::MakeNode(base, "Reshape", {packed.x, shape_name}, {reshaped}));
    inputs = {reshaped};  // key and value absent
  } else {
    Unsplit(ed, m.q);
    Unsplit(ed, m.k);
    Unsplit(ed, m.v);
    inputs = {ed.node(m.q.reshape).outputs[0], ed.node(m.k.reshape).outputs[0], ed.node(m.v.reshape).outputs[0]};
  }
  for (size_t n : m.removed) ed.RemoveNode(n);
  ed.RemoveNode(index);
  std::vector<Attribute> attrs = {opt::IntAttr("num_heads", m.q.dims[2]),
                                  opt::FloatAttr("scale", static_cast<float>(m.scale))};
  const Tensor mask = m.bias_constant.defined() || m.bias.empty() ? m.bias_constant : ed.Constant(m.bias);
  if (IsCausalBias(mask, m.q.dims[1], m.k.dims[1])) {
    attrs.push_back(opt::IntAttr("causal", 1));
  } else {
    if (m.bias_constant.defined()) m.bias = ed.AddInitializer(m.bias, std::move(m.bias_constant));
    if (!m.bias.empty()) {
      inputs.resize(3);  // packed: key and value stay absent ("")
      inputs.push_back(m.bias);
    }
  }
  ed.RewriteAs(m.out_transpose, kNeeDomain, "ScaledDotProductAttention", inputs, std::move(attrs));
  return Status::Ok();
}
}  // namespace

Status FuseAttention(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  std::vector<std::string> dropped;  // weights and biases of q/k/v projections now packed together
  for (size_t index : checked.order)
    if (!ed.removed(index)) NEE_RETURN_IF_ERROR(TryFuse(ed, index, &dropped));
  *changed = ed.CommitDroppingInitializers(dropped);
  return Status::Ok();
}

}  // namespace nee
