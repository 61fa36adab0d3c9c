// Operator family: ai.nee TransposeColumnMap (ops/column_map.h), written by
// opt/fuse_column_map.cc. The reference kernel is the definition done
// literally: the full transpose by multi-index, then each step over its
// range element by element; ep/cpu/column_map_fast.cc is tested against it.
#include "ops/column_map.h"

#include <algorithm>

#include "ops/attention_sdpa.h"  // kNeeDomain
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

Result<ColumnMap> ResolveColumnMap(const Node& node, const std::vector<int64_t>& x_dims,
                                   const std::vector<std::vector<int64_t>>& operand_dims) {
  const std::string where = node.Describe() + ": ";
  ColumnMap m;
  const size_t rank = x_dims.size();
  NEE_ASSIGN_OR_RETURN(m.perm, node.GetInts("perm"));
  if (rank == 0 || m.perm.size() != rank) return InvalidModel(where + "perm must list each of X's axes once");
  std::vector<bool> seen(rank, false);
  for (int64_t p : m.perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)])
      return InvalidModel(where + "perm must list each of X's axes once");
    seen[static_cast<size_t>(p)] = true;
    m.out_dims.push_back(x_dims[static_cast<size_t>(p)]);
  }
  const int64_t columns = m.out_dims.back();
  NEE_ASSIGN_OR_RETURN(m.bounds, node.GetInts("bounds"));
  if (m.bounds.size() < 2 || m.bounds.front() != 0 || m.bounds.back() != columns)
    return InvalidModel(where + "bounds must run from 0 to the last dim, " + std::to_string(columns));
  for (size_t j = 1; j < m.bounds.size(); ++j)
    if (m.bounds[j] <= m.bounds[j - 1]) return InvalidModel(where + "bounds must increase");
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> program, node.GetInts("program", {}));
  if (program.size() % 3 != 0) return InvalidModel(where + "program must hold (range, step, operand) triples");
  const std::vector<int64_t> row_dims(m.out_dims.begin(), m.out_dims.end() - 1);
  for (size_t i = 0; i < program.size(); i += 3) {
    const int64_t range = program[i], code = program[i + 1], operand = program[i + 2];
    if (range < 0 || range + 1 >= static_cast<int64_t>(m.bounds.size()))
      return InvalidModel(where + "program names range " + std::to_string(range) + ", which bounds do not have");
    if (code < 0 || code >= kColumnStepCount) return InvalidModel(where + "unknown step " + std::to_string(code));
    ColumnMapStep step{static_cast<size_t>(range), static_cast<ColumnStep>(code), 0, row_dims, {}, 0};
    if (step.op == ColumnStep::kSquare) {
      if (operand != 0) return InvalidModel(where + "a square step takes no operand");
      m.steps.push_back(std::move(step));
      continue;
    }
    if (operand < 1 || operand >= static_cast<int64_t>(operand_dims.size()))
      return InvalidModel(where + "program names input " + std::to_string(operand) + ", which the node does not have");
    step.operand = static_cast<size_t>(operand);
    // The operand broadcast onto [row dims..., width]: right-aligned, each dim 1 or equal.
    const std::vector<int64_t>& c = operand_dims[step.operand];
    const int64_t width = m.bounds[step.range + 1] - m.bounds[step.range];
    if (c.size() > rank) return InvalidModel(where + "operand " + std::to_string(operand) + " has a higher rank than X");
    std::vector<int64_t> target = row_dims;
    target.push_back(width);
    std::vector<int64_t> strides(rank, 0);
    int64_t stride = 1;
    for (size_t k = 0; k < c.size(); ++k) {
      const size_t a = rank - 1 - k, ci = c.size() - 1 - k;
      if (c[ci] != 1 && c[ci] != target[a])
        return InvalidModel(where + "operand " + std::to_string(operand) + " does not broadcast to its range's shape");
      if (c[ci] != 1) strides[a] = stride;
      stride *= c[ci];
    }
    step.column_stride = strides.back();
    step.row_strides.assign(strides.begin(), strides.end() - 1);
    m.steps.push_back(std::move(step));
  }
  return m;
}

namespace {

Status InferTransposeColumnMap(InferenceContext& ctx) {
  std::vector<std::vector<int64_t>> dims(ctx.num_inputs());
  bool known = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    NEE_ASSIGN_OR_RETURN(const TypeInfo* t, InputTensorType(ctx, i));
    if (t->elem_type != DataType::kFloat)
      return ctx.InputError(i, std::string("must be float32, got ") + DataTypeName(t->elem_type));
    if (!t->shape || !ShapeIsStatic(*t->shape, &dims[i])) known = false;
  }
  if (!known) {  // checked at run time
    ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat);
    return Status::Ok();
  }
  NEE_ASSIGN_OR_RETURN(ColumnMap m, ResolveColumnMap(ctx.node, dims[0], dims));
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, ShapeFromDims(m.out_dims));
  return Status::Ok();
}

// Offsets along `dims` (row-major) of a multi-index kept as an odometer.
int64_t Offset(const std::vector<int64_t>& index, const std::vector<int64_t>& strides) {
  int64_t at = 0;
  for (size_t d = 0; d < index.size(); ++d) at += index[d] * strides[d];
  return at;
}

bool Advance(std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  for (size_t d = index.size(); d-- > 0;) {
    if (++index[d] < dims[d]) return true;
    index[d] = 0;
  }
  return false;
}

Status TransposeColumnMapKernel(KernelContext& ctx) {
  std::vector<std::vector<int64_t>> dims(ctx.num_inputs());
  std::vector<const float*> data(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
    if (t->dtype() != DataType::kFloat) return ctx.InputError(i, "must be float32, got " + t->Describe());
    dims[i] = t->dims();
    data[i] = t->data<float>();
  }
  NEE_ASSIGN_OR_RETURN(ColumnMap m, ResolveColumnMap(ctx.node(), dims[0], dims));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, m.out_dims));
  if (out.num_elements() == 0) return Status::Ok();
  float* y = out.data<float>();
  // The transpose: output index -> input offset through X's strides.
  const size_t rank = m.out_dims.size();
  std::vector<int64_t> x_strides(rank), out_strides(rank);
  for (size_t a = rank, s = 1; a-- > 0;) x_strides[a] = static_cast<int64_t>(s), s *= static_cast<size_t>(dims[0][a]);
  for (size_t k = 0; k < rank; ++k) out_strides[k] = x_strides[static_cast<size_t>(m.perm[k])];
  std::vector<int64_t> index(rank, 0);
  int64_t i = 0;
  do {
    y[i++] = data[0][Offset(index, out_strides)];
  } while (Advance(index, m.out_dims));
  // The steps, in order, each over its range.
  const int64_t columns = m.out_dims.back();
  for (const ColumnMapStep& step : m.steps) {
    const int64_t begin = m.bounds[step.range], end = m.bounds[step.range + 1];
    const float* c = step.operand ? data[step.operand] : nullptr;
    std::vector<int64_t> row(step.row_dims.size(), 0);
    int64_t r = 0;
    do {
      const int64_t base = c ? Offset(row, step.row_strides) : 0;
      for (int64_t col = begin; col < end; ++col) {
        float& v = y[r * columns + col];
        v = ApplyColumnStep(step.op, v, c ? c[base + (col - begin) * step.column_stride] : 0.f);
      }
      ++r;
    } while (Advance(row, step.row_dims));
  }
  return Status::Ok();
}

}  // namespace

void RegisterColumnMapOps(OpRegistry& registry) {
  registry.RegisterVersions(kNeeDomain, "TransposeColumnMap", {1}, InferTransposeColumnMap, TransposeColumnMapKernel);
}

}  // namespace nee
