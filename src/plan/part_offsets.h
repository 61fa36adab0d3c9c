// Where one planned slot can live inside another's bytes, op by op: the rules
// the memory planner (plan/memory_plan.cc) builds its alias groups from.
// Every rule answers only for whole-byte element types (a 4-bit part may
// start mid-byte) and for parts that are one contiguous run of the bigger
// tensor; the kernels of these ops skip a copy onto itself, so a part already
// in place costs nothing and any part not in place is copied as before.
#pragma once
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "plan/execution_plan.h"

namespace nee {

// What the planner knows of each slot: its byte size (0: not planned), and
// the element type and dims of the planned ones.
struct SlotLayout {
  const std::vector<size_t>& bytes;
  const std::vector<DataType>& type;
  const std::vector<std::vector<int64_t>>& dims;
};

// Ops whose output holds exactly the input's bytes under another shape
// (Reshape, Flatten, Squeeze, Unsqueeze, Identity).
bool IsViewNode(const PlannedNode& pn);

// An ONNX Concat (a custom domain's op of that name is not one).
bool IsConcatNode(const PlannedNode& pn);

// A Concat whose dims before the axis are all 1 (e.g. channels of one image)
// is its inputs' bytes one after another. Returns each input's byte offset in
// the output, or nothing when that does not hold or some input is not planned.
std::vector<size_t> ConcatPartOffsets(const PlannedNode& pn, const SlotLayout& slots);

// A Slice whose output is one contiguous run of its input (step 1 where it
// moves, every dim before the sliced ones 1 in the output): (output slot,
// byte offset in the input), or nothing. Slices from opset 10 read starts,
// ends, axes and steps from `constants` (values known for this signature).
std::vector<std::pair<int, size_t>> SliceViewOffset(const PlannedNode& pn, const ExecutionPlan& plan,
                                                    const SlotLayout& slots,
                                                    const std::unordered_map<std::string, Tensor>* constants);

// A Split whose dims before the axis are all 1: (output slot, byte offset in
// the input) for each planned output up to the first unplanned or omitted
// one (later outputs' offsets depend on its size).
std::vector<std::pair<int, size_t>> SplitViewOffsets(const PlannedNode& pn, const SlotLayout& slots);

}  // namespace nee
