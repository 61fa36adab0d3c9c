// Level-2 rewrites onto Gemm (one SGEMM call with the bias added in place):
//   MatMul(A[M,K], B[K,N] constant) -> Add(bias constant)  => Gemm(A, B, bias)
//   Transpose(perm [1,0]) feeding a Gemm's A or B         => Gemm transA / transB
#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

bool IsFloatMatrix(const TypeInfo* t) { return opt::IsFloatWithRank(t) && t->shape->size() == 2; }

// Whether a bias of `bias_dims` broadcasts to `out` ([M, N], possibly
// symbolic) without growing it: every dim is 1 or the known output dim.
bool BiasFitsOutput(const std::vector<int64_t>& bias_dims, const Shape& out) {
  if (bias_dims.size() > 2) return false;
  size_t pad = 2 - bias_dims.size();
  for (size_t d = 0; d < bias_dims.size(); ++d) {
    const Dim& o = out[d + pad];
    if (bias_dims[d] != 1 && !(o.known() && o.value == bias_dims[d])) return false;
  }
  return true;
}

Status TryFuseMatMulAdd(GraphEditor& ed, size_t index) {
  const Node& add = ed.node(index);
  if (!opt::IsOp(add, "Add") || add.inputs.size() != 2 || add.outputs.size() != 1 || !add.attributes.empty())
    return Status::Ok();
  // Gemm before opset 7 broadcast C only with an attribute; Add likewise.
  if (ed.checked().opsets[index] < 7) return Status::Ok();
  for (size_t side = 0; side < 2; ++side) {
    const std::string& product = add.inputs[side];
    int64_t producer = ed.Producer(product);
    if (producer < 0 || !ed.OnlyUsedBy(product, index)) continue;
    size_t mm_index = static_cast<size_t>(producer);
    const Node& mm = ed.node(mm_index);
    if (!opt::IsOp(mm, "MatMul") || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
    const TypeInfo* a = ed.TensorType(mm.inputs[0]);
    const TypeInfo* b = ed.TensorType(mm.inputs[1]);
    const TypeInfo* y = ed.TensorType(product);
    if (!IsFloatMatrix(a) || !IsFloatMatrix(b) || !IsFloatMatrix(y)) continue;
    if (!opt::IsFloatTensor(ed.Constant(mm.inputs[1]))) continue;
    const std::string& bias_name = add.inputs[1 - side];
    Tensor bias = ed.Constant(bias_name);
    if (!opt::IsFloatTensor(bias) || !BiasFitsOutput(bias.dims(), *y->shape)) continue;
    std::string output = add.outputs[0];
    ed.RemoveNode(index);
    Node& gemm = ed.node(mm_index);
    gemm.op_type = "Gemm";
    gemm.attributes.clear();
    ed.SetInput(mm_index, 2, bias_name);
    ed.RenameOutput(mm_index, 0, output);
    return Status::Ok();
  }
  return Status::Ok();
}

// The node's int attribute, set (added when missing).
void SetIntAttr(Node& node, const std::string& name, int64_t value) {
  for (Attribute& a : node.attributes) {
    if (a.name == name) {
      a.type = AttrType::kInt;
      a.i = value;
      return;
    }
  }
  Attribute a;
  a.name = name;
  a.type = AttrType::kInt;
  a.i = value;
  node.attributes.push_back(std::move(a));
}

// Whether the Transpose swaps the two axes of a matrix.
bool IsMatrixTranspose(GraphEditor& ed, const Node& t) {
  if (!opt::IsOp(t, "Transpose") || t.inputs.size() != 1 || t.outputs.size() != 1) return false;
  if (opt::HasOtherAttributes(t, {"perm"})) return false;
  const TypeInfo* in = ed.TensorType(t.inputs[0]);
  if (!in || !in->shape || in->shape->size() != 2) return false;
  auto perm = t.GetInts("perm", {1, 0});
  return perm.ok() && perm.value() == std::vector<int64_t>{1, 0};
}

Status TryFoldTransposes(GraphEditor& ed, size_t index) {
  const Node& gemm = ed.node(index);
  if (!opt::IsOp(gemm, "Gemm") || gemm.inputs.size() < 2) return Status::Ok();
  if (opt::HasOtherAttributes(gemm, {"alpha", "beta", "transA", "transB", "broadcast"})) return Status::Ok();
  for (size_t side = 0; side < 2; ++side) {
    const std::string& name = ed.node(index).inputs[side];
    int64_t producer = ed.Producer(name);
    if (producer < 0 || !ed.OnlyUsedBy(name, index)) continue;
    const Node& t = ed.node(static_cast<size_t>(producer));
    if (!IsMatrixTranspose(ed, t)) continue;
    const char* attr = side == 0 ? "transA" : "transB";
    auto current = ed.node(index).GetInt(attr, 0);
    if (!current.ok()) continue;
    std::string source = t.inputs[0];
    ed.RemoveNode(static_cast<size_t>(producer));
    ed.SetInput(index, side, source);
    SetIntAttr(ed.node(index), attr, current.value() ? 0 : 1);
  }
  return Status::Ok();
}

Status RunOverNodes(Graph& graph, const CheckedGraph& checked, bool* changed,
                    Status (*rewrite)(GraphEditor&, size_t)) {
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order)
    if (!ed.removed(index)) NEE_RETURN_IF_ERROR(rewrite(ed, index));
  *changed = ed.Commit();
  return Status::Ok();
}
}  // namespace

Status FuseMatMulAddIntoGemm(Graph& graph, const CheckedGraph& checked, bool* changed) {
  return RunOverNodes(graph, checked, changed, TryFuseMatMulAdd);
}

Status FoldTransposeIntoGemm(Graph& graph, const CheckedGraph& checked, bool* changed) {
  return RunOverNodes(graph, checked, changed, TryFoldTransposes);
}

}  // namespace nee
