// ai.nee TransposeColumnMap: a Transpose whose output's last axis is cut into
// column ranges, each put through a chain of elementwise steps with constant
// operands, and the ranges concatenated back in order. A detector head's box
// decode is this (opt/fuse_column_map.cc writes it):
//   t = Transpose(x, perm)                 [1, 3, 80, 80, 85]
//   xy = (t[..., 0:2] * 2 - 0.5 + grid) * stride
//   wh = (t[..., 2:4] * 2)^2 * anchors
//   y = Concat(xy, wh, t[..., 4:85], axis = -1)
// one pass instead of a Transpose, three Slices, the arithmetic and a Concat
// each copying the tensor.
//
//   TransposeColumnMap(X, operands...) -> Y
//   perm:    INTS, the Transpose's permutation (required)
//   bounds:  INTS, 0 = b0 < b1 < ... < bk = Y's last dim: range j is columns [b_j, b_{j+1})
//   program: INTS, triples (range j, step code, operand input index), applied in order
//
// A step replaces range j's values v by op(v, c), c the operand input
// broadcast (unidirectionally, numpy rules) to the range's shape [Y dims
// but the last, b_{j+1} - b_j]. Each step is the one IEEE operation the ONNX
// op computes, so Y is bitwise the unfused graph's output: Pow(v, 2) is v * v
// (a correctly rounded pow of a float squared is the float product).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "ir/graph.h"

namespace nee {

enum class ColumnStep : int64_t {
  kAdd = 0,      // v + c
  kSub = 1,      // v - c
  kSubFrom = 2,  // c - v
  kMul = 3,      // v * c
  kDiv = 4,      // v / c
  kDivInto = 5,  // c / v
  kSquare = 6,   // v * v (operand index 0: none)
};
constexpr int64_t kColumnStepCount = 7;

inline float ApplyColumnStep(ColumnStep op, float v, float c) {
  switch (op) {
    case ColumnStep::kAdd: return v + c;
    case ColumnStep::kSub: return v - c;
    case ColumnStep::kSubFrom: return c - v;
    case ColumnStep::kMul: return v * c;
    case ColumnStep::kDiv: return v / c;
    case ColumnStep::kDivInto: return c / v;
    case ColumnStep::kSquare: return v * v;
  }
  return v;
}

struct ColumnMapStep {
  size_t range;
  ColumnStep op;
  size_t operand;                 // input index (0: none, for kSquare)
  std::vector<int64_t> row_dims;  // Y's dims but the last
  std::vector<int64_t> row_strides;  // per row dim, the operand's stride (0 where broadcast)
  int64_t column_stride = 0;      // the operand's stride along the range's columns (0 or 1)
};

struct ColumnMap {
  std::vector<int64_t> perm;       // as given
  std::vector<int64_t> out_dims;   // Y's dims
  std::vector<int64_t> bounds;
  std::vector<ColumnMapStep> steps;
};

// The node's attributes checked against X's dims and the operands' dims
// (index 0 unused); errors name the node. Shared by the shape rule, the
// reference kernel and the fast kernel.
Result<ColumnMap> ResolveColumnMap(const Node& node, const std::vector<int64_t>& x_dims,
                                   const std::vector<std::vector<int64_t>>& operand_dims);

}  // namespace nee
