// Operator family: MatMul, Gemm, MatMulInteger, Einsum.
//
// All reference kernels reduce to the row-parallel GEMM core of nn_util.h
// (except Einsum, a generic loop over its labels). float16/bfloat16 compute
// in float; integers in wrapping 64-bit arithmetic, narrowed on store.
#include <algorithm>
#include <array>
#include <map>

#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using nn::ComputeInput;
using nn::ComputeKind;
using nn::ComputeKindOf;
using nn::ComputeOutput;

// Rows per ParallelFor chunk so that a chunk holds roughly 32k multiply-adds.
int64_t RowsPerChunk(int64_t N, int64_t K) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, N * K)); }

// ---- MatMul (numpy semantics) -------------------------------------------------

// The shape of a numpy matmul on operands of (possibly symbolic) shapes.
Result<Shape> MatMulShape(const InferenceContext& ctx, Shape a, Shape b) {
  if (a.empty()) return ctx.InputError(0, "must have rank >= 1 for MatMul");
  if (b.empty()) return ctx.InputError(1, "must have rank >= 1 for MatMul");
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), Dim::Known(1));
  if (b_vec) b.push_back(Dim::Known(1));
  const Dim& ka = a[a.size() - 1];
  const Dim& kb = b[b.size() - 2];
  if (nn::DimsConflict(ka, kb))
    return ctx.Error("MatMul inner dims differ: A has K=" + ka.ToString() + ", B has K=" + kb.ToString());
  Shape batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  auto batch = BroadcastShapes(batch_a, batch_b);
  if (!batch.ok()) return ctx.Error("MatMul batch dims do not broadcast: " + batch.status().message());
  Shape out = std::move(batch).value();
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b[b.size() - 1]);
  return out;
}

Status InferMatMulLike(InferenceContext& ctx, DataType out_type) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* a, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* b, InputTensorType(ctx, 1));
  if (out_type == DataType::kUndefined) {
    out_type = a->elem_type;
    if (a->elem_type != DataType::kUndefined && b->elem_type != DataType::kUndefined &&
        a->elem_type != b->elem_type)
      return ctx.InputError(1, std::string("has element type ") + DataTypeName(b->elem_type) +
                                   ", expected " + DataTypeName(a->elem_type) + " like input 0");
  }
  std::optional<Shape> shape;
  if (a->shape && b->shape) {
    NEE_ASSIGN_OR_RETURN(Shape s, MatMulShape(ctx, *a->shape, *b->shape));
    shape = std::move(s);
  }
  ctx.output_types[0] = TypeInfo::Tensor(out_type, std::move(shape));
  return Status::Ok();
}

Status InferMatMul(InferenceContext& ctx) { return InferMatMulLike(ctx, DataType::kUndefined); }

// Concrete geometry of a batched matmul after numpy's 1-D promotion.
struct MatMulGeometry {
  int64_t M = 1, K = 1, N = 1;
  std::vector<int64_t> out_dims;
  std::vector<int64_t> a_offsets, b_offsets;  // per output batch: element offset of its A / B matrix
};

Result<MatMulGeometry> PlanMatMul(const KernelContext& ctx, std::vector<int64_t> a, std::vector<int64_t> b) {
  if (a.empty()) return ctx.InputError(0, "must have rank >= 1 for MatMul");
  if (b.empty()) return ctx.InputError(1, "must have rank >= 1 for MatMul");
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  MatMulGeometry g;
  g.M = a[a.size() - 2];
  g.K = a[a.size() - 1];
  g.N = b[b.size() - 1];
  if (b[b.size() - 2] != g.K)
    return ctx.InputError(1, "has K=" + std::to_string(b[b.size() - 2]) + " but input 0 has K=" +
                                 std::to_string(g.K) + " (shapes " + DimsToString(a) + " x " + DimsToString(b) + ")");
  std::vector<int64_t> batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  auto batch = BroadcastDims(batch_a, batch_b);
  if (!batch.ok()) return ctx.Error("MatMul batch dims do not broadcast: " + batch.status().message());
  const std::vector<int64_t>& out_batch = batch.value();
  // Per-batch matrix offsets: walk the broadcast batch index.
  const size_t r = out_batch.size();
  batch_a.insert(batch_a.begin(), r - batch_a.size(), 1);
  batch_b.insert(batch_b.begin(), r - batch_b.size(), 1);
  std::vector<int64_t> sa = StridesOf(batch_a), sb = StridesOf(batch_b);
  const int64_t count = ProductOf(out_batch);
  std::vector<int64_t> index(r, 0);
  for (int64_t bi = 0; bi < count; ++bi) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < r; ++d) {
      if (batch_a[d] != 1) oa += index[d] * sa[d];
      if (batch_b[d] != 1) ob += index[d] * sb[d];
    }
    g.a_offsets.push_back(oa * g.M * g.K);
    g.b_offsets.push_back(ob * g.K * g.N);
    for (size_t d = r; d-- > 0;) {
      if (++index[d] < out_batch[d]) break;
      index[d] = 0;
    }
  }
  g.out_dims = out_batch;
  if (!a_vec) g.out_dims.push_back(g.M);
  if (!b_vec) g.out_dims.push_back(g.N);
  return g;
}

template <typename A>
void RunBatchedMatMul(const KernelContext& ctx, const MatMulGeometry& g, const A* a, const A* b, A* out) {
  const int64_t batches = static_cast<int64_t>(g.a_offsets.size());
  const int64_t M = g.M, N = g.N, K = g.K;
  ctx.ParallelFor(batches * M, RowsPerChunk(N, K), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t bi = row / M, i = row % M;
      const A* a_mat = a + g.a_offsets[static_cast<size_t>(bi)];
      const A* b_mat = b + g.b_offsets[static_cast<size_t>(bi)];
      A* c_mat = out + bi * M * N;
      nn::GemmRows<A>(i, i + 1, N, K, a_mat, K, 1, b_mat, c_mat, false);
    }
  });
}

template <typename A>
Status MatMulTyped(KernelContext& ctx, const Tensor& a, const Tensor& b, DataType out_type) {
  NEE_ASSIGN_OR_RETURN(MatMulGeometry g, PlanMatMul(ctx, a.dims(), b.dims()));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, out_type, g.out_dims));
  ComputeInput<A> ca(a), cb(b);
  ComputeOutput<A> cy(y);
  RunBatchedMatMul<A>(ctx, g, ca.data(), cb.data(), cy.data());
  cy.Commit();
  return Status::Ok();
}

Status MatMulKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  NEE_RETURN_IF_ERROR(nn::RequireElementType(ctx, 1, b->dtype(), a->dtype()));
  switch (ComputeKindOf(a->dtype())) {
    case ComputeKind::kFloat: return MatMulTyped<float>(ctx, *a, *b, a->dtype());
    case ComputeKind::kDouble: return MatMulTyped<double>(ctx, *a, *b, a->dtype());
    case ComputeKind::kInteger: return MatMulTyped<uint64_t>(ctx, *a, *b, a->dtype());
    default: return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError("MatMul", a->dtype()));
  }
}

// ---- MatMulInteger ---------------------------------------------------------------

Status InferMatMulInteger(InferenceContext& ctx) { return InferMatMulLike(ctx, DataType::kInt32); }

// Reads a zero point: a scalar, or one value per row (A) / column (B) given
// as a tensor with exactly `per_axis` elements. Returns one value per index.
Result<std::vector<int64_t>> ReadZeroPoints(const KernelContext& ctx, size_t input, int64_t per_axis,
                                            DataType data_type) {
  std::vector<int64_t> zp(static_cast<size_t>(per_axis), 0);
  if (!ctx.has_input(input)) return zp;
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(input));
  if (t->dtype() != data_type)
    return ctx.InputError(input, std::string("has element type ") + DataTypeName(t->dtype()) +
                                     ", expected " + DataTypeName(data_type) + " like the data it offsets");
  if (t->num_elements() == 1) {
    std::fill(zp.begin(), zp.end(), static_cast<int64_t>(ReadAsDouble(*t, 0)));
  } else if (t->num_elements() == per_axis) {
    for (int64_t i = 0; i < per_axis; ++i) zp[static_cast<size_t>(i)] = static_cast<int64_t>(ReadAsDouble(*t, i));
  } else {
    return ctx.InputError(input, "zero point has " + std::to_string(t->num_elements()) +
                                     " elements; expected 1 or " + std::to_string(per_axis));
  }
  return zp;
}

Status MatMulIntegerKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  if (!Is8Bit(a->dtype())) return ctx.InputError(0, std::string("must be int8 or uint8, got ") + DataTypeName(a->dtype()));
  if (!Is8Bit(b->dtype())) return ctx.InputError(1, std::string("must be int8 or uint8, got ") + DataTypeName(b->dtype()));
  NEE_ASSIGN_OR_RETURN(MatMulGeometry g, PlanMatMul(ctx, a->dims(), b->dims()));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> a_zp, ReadZeroPoints(ctx, 2, g.M, a->dtype()));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> b_zp, ReadZeroPoints(ctx, 3, g.N, b->dtype()));
  // Subtract the zero points up front; products of 8-bit values fit easily.
  std::vector<int64_t> av(static_cast<size_t>(a->num_elements())), bv(static_cast<size_t>(b->num_elements()));
  nn::ConvertToCompute<int64_t>(*a, av.data());
  nn::ConvertToCompute<int64_t>(*b, bv.data());
  for (size_t i = 0; i < av.size(); ++i) av[i] -= a_zp[(i / static_cast<size_t>(g.K)) % a_zp.size()];
  for (size_t i = 0; i < bv.size(); ++i) bv[i] -= b_zp[i % b_zp.size()];
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kInt32, g.out_dims));
  std::vector<int64_t> acc(static_cast<size_t>(y.num_elements()));
  RunBatchedMatMul<int64_t>(ctx, g, av.data(), bv.data(), acc.data());
  for (size_t i = 0; i < acc.size(); ++i) y.data<int32_t>()[i] = static_cast<int32_t>(acc[i]);
  return Status::Ok();
}

// ---- Gemm ---------------------------------------------------------------------------

struct GemmAttrs {
  bool trans_a = false, trans_b = false;
  float alpha = 1, beta = 1;
};

Result<GemmAttrs> ReadGemmAttrs(const Node& node) {
  GemmAttrs g;
  NEE_ASSIGN_OR_RETURN(int64_t ta, node.GetInt("transA", 0));
  NEE_ASSIGN_OR_RETURN(int64_t tb, node.GetInt("transB", 0));
  NEE_ASSIGN_OR_RETURN(g.alpha, node.GetFloat("alpha", 1.0f));
  NEE_ASSIGN_OR_RETURN(g.beta, node.GetFloat("beta", 1.0f));
  g.trans_a = ta != 0;
  g.trans_b = tb != 0;
  return g;
}

// Whether C's shape broadcasts unidirectionally to [M, N].
bool GemmBiasBroadcasts(const Shape& c, const Dim& m, const Dim& n) {
  if (c.size() > 2) return false;
  const Dim* target[2] = {&m, &n};
  for (size_t i = 0; i < c.size(); ++i) {
    const Dim& t = *target[2 - c.size() + i];
    if (c[i].known() && c[i].value != 1 && t.known() && c[i].value != t.value) return false;
  }
  return true;
}

// Gemm before opset 7 broadcasts C only when its 'broadcast' attribute is set (then as from 7 on:
// unidirectionally to [M, N]); without it C must be [M, N] exactly.
Result<bool> GemmCMustBeExact(const Node& node, int64_t opset) {
  if (opset >= 7) return false;
  NEE_ASSIGN_OR_RETURN(int64_t broadcast, node.GetInt("broadcast", 0));
  return broadcast == 0;
}

Status InferGemm(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* a, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* b, InputTensorType(ctx, 1));
  NEE_ASSIGN_OR_RETURN(GemmAttrs attrs, ReadGemmAttrs(ctx.node));
  if (a->elem_type != DataType::kUndefined && b->elem_type != DataType::kUndefined && a->elem_type != b->elem_type)
    return ctx.InputError(1, std::string("has element type ") + DataTypeName(b->elem_type) + ", expected " +
                                 DataTypeName(a->elem_type));
  if (a->shape && a->shape->size() != 2) return ctx.InputError(0, "must be 2-D for Gemm, got " + ShapeToString(*a->shape));
  if (b->shape && b->shape->size() != 2) return ctx.InputError(1, "must be 2-D for Gemm, got " + ShapeToString(*b->shape));
  Dim m = Dim::Unknown(), n = Dim::Unknown(), ka = Dim::Unknown(), kb = Dim::Unknown();
  if (a->shape) {
    m = (*a->shape)[attrs.trans_a ? 1 : 0];
    ka = (*a->shape)[attrs.trans_a ? 0 : 1];
  }
  if (b->shape) {
    kb = (*b->shape)[attrs.trans_b ? 1 : 0];
    n = (*b->shape)[attrs.trans_b ? 0 : 1];
  }
  if (nn::DimsConflict(ka, kb))
    return ctx.Error("Gemm inner dims differ: A gives K=" + ka.ToString() + ", B gives K=" + kb.ToString());
  if (const Shape* c = nn::KnownShape(ctx, 2); c && !GemmBiasBroadcasts(*c, m, n))
    return ctx.InputError(2, "of shape " + ShapeToString(*c) + " does not broadcast to [" + m.ToString() + "," +
                                 n.ToString() + "]");
  NEE_ASSIGN_OR_RETURN(bool exact_c, GemmCMustBeExact(ctx.node, ctx.opset));
  if (const Shape* c = nn::KnownShape(ctx, 2);
      exact_c && c && (c->size() != 2 || nn::DimsConflict((*c)[0], m) || nn::DimsConflict((*c)[1], n)))
    return ctx.InputError(2, "of shape " + ShapeToString(*c) + " is not [" + m.ToString() + "," + n.ToString() +
                                 "] and the broadcast attribute is 0");
  ctx.output_types[0] = TypeInfo::Tensor(a->elem_type, Shape{m, n});
  return Status::Ok();
}

template <typename A>
Status GemmTyped(KernelContext& ctx, const GemmAttrs& attrs, const Tensor& a, const Tensor& b, const Tensor* c,
                 int64_t M, int64_t N, int64_t K) {
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, a.dtype(), {M, N}));
  ComputeInput<A> ca(a), cb(b);
  // The core wants B as row-major [K, N]; a transposed B is copied once.
  std::vector<A> b_t;
  const A* b_rows = cb.data();
  if (attrs.trans_b) {
    b_t.resize(static_cast<size_t>(K * N));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) b_t[static_cast<size_t>(k * N + j)] = cb[j * K + k];
    b_rows = b_t.data();
  }
  ComputeInput<A> cc;
  int64_t c_row_stride = 0, c_col_stride = 0;
  if (c) {
    cc = ComputeInput<A>(*c);
    const std::vector<int64_t>& cd = c->dims();
    const int64_t c_rows = cd.size() == 2 ? cd[0] : 1;
    const int64_t c_cols = cd.empty() ? 1 : cd.back();
    c_row_stride = c_rows == 1 ? 0 : c_cols;
    c_col_stride = c_cols == 1 ? 0 : 1;
  }
  const int64_t a_row_stride = attrs.trans_a ? 1 : K, a_col_stride = attrs.trans_a ? M : 1;
  ComputeOutput<A> cy(y);
  A* out = cy.data();
  ctx.ParallelFor(M, RowsPerChunk(N, K), [&](int64_t begin, int64_t end) {
    nn::GemmRows<A>(begin, end, N, K, ca.data(), a_row_stride, a_col_stride, b_rows, out, false);
    for (int64_t i = begin; i < end; ++i)
      for (int64_t j = 0; j < N; ++j) {
        A& v = out[i * N + j];
        if constexpr (std::is_integral_v<A>) {
          // Integers: stay exact when alpha and beta are the default 1.
          if (attrs.alpha != 1.0f) v = static_cast<A>(static_cast<int64_t>(static_cast<double>(static_cast<int64_t>(v)) * attrs.alpha));
          if (c) {
            A cv = cc[i * c_row_stride + j * c_col_stride];
            if (attrs.beta != 1.0f) cv = static_cast<A>(static_cast<int64_t>(static_cast<double>(static_cast<int64_t>(cv)) * attrs.beta));
            v += cv;
          }
        } else {
          v = static_cast<A>(attrs.alpha) * v;
          if (c) v += static_cast<A>(attrs.beta) * cc[i * c_row_stride + j * c_col_stride];
        }
      }
  });
  cy.Commit();
  return Status::Ok();
}

Status GemmKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(GemmAttrs attrs, ReadGemmAttrs(ctx.node()));
  if (a->rank() != 2) return ctx.InputError(0, "must be 2-D for Gemm, got " + DimsToString(a->dims()));
  if (b->rank() != 2) return ctx.InputError(1, "must be 2-D for Gemm, got " + DimsToString(b->dims()));
  NEE_RETURN_IF_ERROR(nn::RequireElementType(ctx, 1, b->dtype(), a->dtype()));
  const int64_t M = attrs.trans_a ? a->dim(1) : a->dim(0);
  const int64_t K = attrs.trans_a ? a->dim(0) : a->dim(1);
  const int64_t kb = attrs.trans_b ? b->dim(1) : b->dim(0);
  const int64_t N = attrs.trans_b ? b->dim(0) : b->dim(1);
  if (kb != K)
    return ctx.InputError(1, "gives K=" + std::to_string(kb) + " but input 0 gives K=" + std::to_string(K) +
                                 " (A " + DimsToString(a->dims()) + ", B " + DimsToString(b->dims()) + ")");
  NEE_ASSIGN_OR_RETURN(const Tensor* c, OptionalInputTensor(ctx, 2));
  if (c) {
    NEE_RETURN_IF_ERROR(nn::RequireElementType(ctx, 2, c->dtype(), a->dtype()));
    if (!GemmBiasBroadcasts(ShapeFromDims(c->dims()), Dim::Known(M), Dim::Known(N)))
      return ctx.InputError(2, "of shape " + DimsToString(c->dims()) + " does not broadcast to [" +
                                   std::to_string(M) + "," + std::to_string(N) + "]");
    NEE_ASSIGN_OR_RETURN(bool exact_c, GemmCMustBeExact(ctx.node(), ctx.opset()));
    if (exact_c && c->dims() != std::vector<int64_t>{M, N})
      return ctx.InputError(2, "of shape " + DimsToString(c->dims()) + " is not [" + std::to_string(M) + "," +
                                   std::to_string(N) + "] and the broadcast attribute is 0");
  }
  switch (ComputeKindOf(a->dtype())) {
    case ComputeKind::kFloat: return GemmTyped<float>(ctx, attrs, *a, *b, c, M, N, K);
    case ComputeKind::kDouble: return GemmTyped<double>(ctx, attrs, *a, *b, c, M, N, K);
    case ComputeKind::kInteger: return GemmTyped<uint64_t>(ctx, attrs, *a, *b, c, M, N, K);
    default: return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError("Gemm", a->dtype()));
  }
}

// ---- Einsum -------------------------------------------------------------------------

// Labels: 'A'..'Z' -> 0..25, 'a'..'z' -> 26..51 (ASCII order, which numpy's
// implicit output follows); ellipsis dims get 52 + position.
constexpr int kEllipsisLabel = 52;

struct EinsumTerm {
  std::vector<int> labels;  // letters only
  int ellipsis_at = -1;     // index into labels where "..." stands, or -1
};

struct EinsumPlan {
  std::vector<std::vector<int>> inputs;  // label per input dim
  std::vector<int> output;               // label per output dim
  int num_labels = kEllipsisLabel;
};

Result<EinsumTerm> ParseEinsumTerm(const std::string& s, const std::string& eq) {
  EinsumTerm t;
  for (size_t i = 0; i < s.size(); ++i) {
    char ch = s[i];
    if (ch >= 'A' && ch <= 'Z') {
      t.labels.push_back(ch - 'A');
    } else if (ch >= 'a' && ch <= 'z') {
      t.labels.push_back(26 + ch - 'a');
    } else if (ch == '.' && s.compare(i, 3, "...") == 0 && t.ellipsis_at < 0) {
      t.ellipsis_at = static_cast<int>(t.labels.size());
      i += 2;
    } else {
      return InvalidModel("invalid einsum equation '" + eq + "' at term '" + s + "'");
    }
  }
  return t;
}

// Parses `equation` for inputs of the given ranks into per-dim labels.
Result<EinsumPlan> PlanEinsum(const std::string& equation, const std::vector<int64_t>& ranks) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq += ch;
  std::string lhs = eq, rhs;
  const size_t arrow = eq.find("->");
  const bool explicit_output = arrow != std::string::npos;
  if (explicit_output) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
  }
  std::vector<std::string> terms;
  size_t start = 0;
  for (;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size())
    return InvalidModel("einsum equation '" + equation + "' has " + std::to_string(terms.size()) +
                        " input terms but the node has " + std::to_string(ranks.size()) + " inputs");
  EinsumPlan plan;
  std::vector<EinsumTerm> parsed;
  int64_t max_ellipsis = 0;
  std::vector<int64_t> ellipsis_rank(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    NEE_ASSIGN_OR_RETURN(EinsumTerm t, ParseEinsumTerm(terms[i], equation));
    const int64_t letters = static_cast<int64_t>(t.labels.size());
    if (t.ellipsis_at < 0 ? letters != ranks[i] : letters > ranks[i])
      return InvalidModel("einsum term '" + terms[i] + "' does not match input " + std::to_string(i) +
                          " of rank " + std::to_string(ranks[i]));
    if (t.ellipsis_at >= 0) ellipsis_rank[i] = ranks[i] - letters;
    max_ellipsis = std::max(max_ellipsis, ellipsis_rank[i]);
    parsed.push_back(std::move(t));
  }
  plan.num_labels = kEllipsisLabel + static_cast<int>(max_ellipsis);
  // Ellipsis dims align to the right, as in broadcasting.
  auto expand = [&](const EinsumTerm& t, int64_t ell_rank) {
    std::vector<int> dims;
    for (size_t k = 0; k <= t.labels.size(); ++k) {
      if (static_cast<int>(k) == t.ellipsis_at)
        for (int64_t e = 0; e < ell_rank; ++e)
          dims.push_back(kEllipsisLabel + static_cast<int>(max_ellipsis - ell_rank + e));
      if (k < t.labels.size()) dims.push_back(t.labels[k]);
    }
    return dims;
  };
  std::vector<int> count(static_cast<size_t>(plan.num_labels), 0);
  for (size_t i = 0; i < parsed.size(); ++i) {
    plan.inputs.push_back(expand(parsed[i], ellipsis_rank[i]));
    for (int l : parsed[i].labels) ++count[static_cast<size_t>(l)];
  }
  if (explicit_output) {
    NEE_ASSIGN_OR_RETURN(EinsumTerm out, ParseEinsumTerm(rhs, equation));
    plan.output = expand(out, out.ellipsis_at >= 0 ? max_ellipsis : 0);
    std::vector<bool> seen(static_cast<size_t>(plan.num_labels), false);
    for (int l : out.labels) {
      if (count[static_cast<size_t>(l)] == 0)
        return InvalidModel("einsum equation '" + equation + "': output label does not appear in any input");
      if (seen[static_cast<size_t>(l)]) return InvalidModel("einsum equation '" + equation + "': output repeats a label");
      seen[static_cast<size_t>(l)] = true;
    }
  } else {
    for (int64_t e = 0; e < max_ellipsis; ++e) plan.output.push_back(kEllipsisLabel + static_cast<int>(e));
    for (int l = 0; l < kEllipsisLabel; ++l)
      if (count[static_cast<size_t>(l)] == 1) plan.output.push_back(l);
  }
  return plan;
}

Status InferEinsum(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(std::string equation, ctx.node.GetString("equation"));
  DataType type = DataType::kUndefined;
  std::vector<int64_t> ranks;
  bool ranks_known = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    NEE_ASSIGN_OR_RETURN(const TypeInfo* t, InputTensorType(ctx, i));
    if (i == 0) type = t->elem_type;
    if (!t->shape) ranks_known = false;
    else ranks.push_back(static_cast<int64_t>(t->shape->size()));
  }
  if (!ranks_known) {
    ctx.output_types[0] = TypeInfo::Tensor(type);
    return Status::Ok();
  }
  auto plan = PlanEinsum(equation, ranks);
  if (!plan.ok()) return ctx.Error(plan.status().message());
  // A label's size: any known dim that is not a broadcast 1.
  std::vector<Dim> sizes(static_cast<size_t>(plan->num_labels), Dim::Unknown());
  std::vector<bool> saw_one(static_cast<size_t>(plan->num_labels), false);
  for (size_t i = 0; i < plan->inputs.size(); ++i)
    for (size_t d = 0; d < plan->inputs[i].size(); ++d) {
      const Dim& dim = (*ctx.input_type(i).shape)[d];
      Dim& s = sizes[static_cast<size_t>(plan->inputs[i][d])];
      if (dim.known() && dim.value == 1) {
        saw_one[static_cast<size_t>(plan->inputs[i][d])] = true;
        continue;
      }
      if (nn::DimsConflict(s, dim))
        return ctx.Error("einsum label has sizes " + s.ToString() + " and " + dim.ToString());
      s = nn::MergeDims(s, dim);
    }
  Shape out;
  for (int l : plan->output) {
    Dim s = sizes[static_cast<size_t>(l)];
    if (!s.known() && s.symbol.empty() && saw_one[static_cast<size_t>(l)]) {
      // Only 1s seen: 1 unless an unknown dim elsewhere says otherwise.
      bool any_unknown = false;
      for (size_t i = 0; i < plan->inputs.size(); ++i)
        for (size_t d = 0; d < plan->inputs[i].size(); ++d)
          if (plan->inputs[i][d] == l && !(*ctx.input_type(i).shape)[d].known()) any_unknown = true;
      if (!any_unknown) s = Dim::Known(1);
    }
    out.push_back(s);
  }
  ctx.output_types[0] = TypeInfo::Tensor(type, std::move(out));
  return Status::Ok();
}

template <typename A>
Status EinsumTyped(KernelContext& ctx, const EinsumPlan& plan, const std::vector<const Tensor*>& inputs,
                   const std::vector<int64_t>& label_size) {
  const size_t n_in = inputs.size();
  std::vector<int64_t> out_dims;
  for (int l : plan.output) out_dims.push_back(label_size[static_cast<size_t>(l)]);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, inputs[0]->dtype(), out_dims));
  // Per input, the element stride of each label (repeated labels add up,
  // which walks the diagonal; broadcast dims of size 1 contribute nothing).
  const size_t L = static_cast<size_t>(plan.num_labels);
  std::vector<std::vector<int64_t>> stride(n_in, std::vector<int64_t>(L, 0));
  for (size_t i = 0; i < n_in; ++i) {
    std::vector<int64_t> s = StridesOf(inputs[i]->dims());
    for (size_t d = 0; d < plan.inputs[i].size(); ++d)
      if (inputs[i]->dim(static_cast<int64_t>(d)) != 1 || label_size[static_cast<size_t>(plan.inputs[i][d])] == 1)
        stride[i][static_cast<size_t>(plan.inputs[i][d])] += s[d];
  }
  // Labels summed over: used by some input, absent from the output.
  std::vector<bool> in_output(L, false);
  for (int l : plan.output) in_output[static_cast<size_t>(l)] = true;
  std::vector<int> summed;
  std::vector<bool> used(L, false);
  for (const auto& dims : plan.inputs)
    for (int l : dims) used[static_cast<size_t>(l)] = true;
  for (size_t l = 0; l < L; ++l)
    if (used[l] && !in_output[l]) summed.push_back(static_cast<int>(l));
  int64_t sum_count = 1;
  for (int l : summed) sum_count *= label_size[static_cast<size_t>(l)];

  std::vector<ComputeInput<A>> data;
  for (const Tensor* t : inputs) data.emplace_back(*t);
  ComputeOutput<A> cy(y);
  A* out = cy.data();
  const int64_t out_count = y.num_elements();
  ctx.ParallelFor(out_count, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, sum_count)), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> base(n_in), off(n_in), idx(summed.size());
    for (int64_t o = begin; o < end; ++o) {
      // Offsets of the output position in every input.
      std::fill(base.begin(), base.end(), 0);
      int64_t rest = o;
      for (size_t d = plan.output.size(); d-- > 0;) {
        const size_t l = static_cast<size_t>(plan.output[d]);
        const int64_t v = rest % label_size[l];
        rest /= label_size[l];
        for (size_t i = 0; i < n_in; ++i) base[i] += v * stride[i][l];
      }
      A acc{};
      std::fill(idx.begin(), idx.end(), 0);
      off = base;
      for (int64_t s = 0; s < sum_count; ++s) {
        A prod = data[0][off[0]];
        for (size_t i = 1; i < n_in; ++i) prod *= data[i][off[i]];
        acc += prod;
        // Advance the summed-label odometer (last label fastest).
        for (size_t k = summed.size(); k-- > 0;) {
          const size_t l = static_cast<size_t>(summed[k]);
          for (size_t i = 0; i < n_in; ++i) off[i] += stride[i][l];
          if (++idx[k] < label_size[l]) break;
          for (size_t i = 0; i < n_in; ++i) off[i] -= stride[i][l] * label_size[l];
          idx[k] = 0;
        }
      }
      out[o] = acc;
    }
  });
  cy.Commit();
  return Status::Ok();
}

Status EinsumKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(std::string equation, ctx.node().GetString("equation"));
  if (ctx.num_inputs() == 0) return ctx.Error("Einsum needs at least one input");
  std::vector<const Tensor*> inputs;
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
    if (!inputs.empty()) {
      NEE_RETURN_IF_ERROR(nn::RequireElementType(ctx, i, t->dtype(), inputs[0]->dtype()));
    }
    inputs.push_back(t);
    ranks.push_back(t->rank());
  }
  auto plan = PlanEinsum(equation, ranks);
  if (!plan.ok()) return ctx.Error(plan.status().message());
  std::vector<int64_t> label_size(static_cast<size_t>(plan->num_labels), 1);
  std::vector<bool> fixed(label_size.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t d = 0; d < plan->inputs[i].size(); ++d) {
      const size_t l = static_cast<size_t>(plan->inputs[i][d]);
      const int64_t v = inputs[i]->dim(static_cast<int64_t>(d));
      if (v == 1) continue;
      if (fixed[l] && label_size[l] != v)
        return ctx.InputError(i, "dim " + std::to_string(d) + " is " + std::to_string(v) +
                                     " but the same einsum label elsewhere has size " + std::to_string(label_size[l]));
      label_size[l] = v;
      fixed[l] = true;
    }
  switch (ComputeKindOf(inputs[0]->dtype())) {
    case ComputeKind::kFloat: return EinsumTyped<float>(ctx, *plan, inputs, label_size);
    case ComputeKind::kDouble: return EinsumTyped<double>(ctx, *plan, inputs, label_size);
    case ComputeKind::kInteger: return EinsumTyped<uint64_t>(ctx, *plan, inputs, label_size);
    default: return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError("Einsum", inputs[0]->dtype()));
  }
}

}  // namespace

void RegisterMatMulOps(OpRegistry& registry) {
  registry.RegisterVersions("", "MatMul", {1, 9, 13}, InferMatMul, MatMulKernel);
  registry.RegisterVersions("", "MatMulInteger", {10}, InferMatMulInteger, MatMulIntegerKernel);
  // Gemm 6 and older carry a 'broadcast' attribute (GemmCMustBeExact) and require C; 7 made
  // broadcasting implicit.
  registry.RegisterVersions("", "Gemm", {1, 6}, InferGemm, GemmKernel);
  registry.RegisterVersions("", "Gemm", {7, 9, 11, 13}, InferGemm, GemmKernel);
  registry.RegisterVersions("", "Einsum", {12, 28}, InferEinsum, EinsumKernel);
}

}  // namespace nee
