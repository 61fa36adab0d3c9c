// A Slice that takes a range of columns (its input's last axis) and nothing
// else, as the fusions that read such Slices straight from their source see
// it: fuse_attention (q, k and v as column ranges of one projection) and
// fuse_column_map (a detector head's decode).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "opt/rewrite_util.h"

namespace nee::opt {

// The constant int64 values of `name` (any rank), or false.
bool ConstantInt64s(const GraphEditor& ed, const std::string& name, std::vector<int64_t>* out);

struct ColumnSlice {
  std::string source;  // the Slice's data input
  int64_t begin = 0;   // columns [begin, end) of source's last axis
  int64_t end = 0;
};

// Whether node `index` is Slice(x, [begin], [end], [last axis] [, [1]]) (opset
// 10 on, bounds as constant inputs, x of static shape) taking a non-empty
// column range; the range is resolved as the Slice kernel resolves it
// (ops/slice_geometry.h), so negative and out-of-range bounds mean what they
// mean there.
bool MatchColumnSlice(const GraphEditor& ed, size_t index, ColumnSlice* out);

}  // namespace nee::opt
