// The static memory plan for one input-shape signature: every intermediate
// tensor whose type and shape are known ahead gets an offset in one arena,
// reusing space between values whose lifetimes do not overlap.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "plan/execution_plan.h"

namespace nee {

struct MemoryPlan {
  static constexpr size_t kAlignment = 64;
  size_t arena_bytes = 0;
  size_t planned_bytes = 0;  // sum of the sizes of all planned intermediates
  // Per slot: offset in the arena (or in its host, below), or -1 when the
  // slot is not planned (graph inputs, outputs other than hosts,
  // initializers, unknown shapes, non-tensors).
  std::vector<int64_t> offset;
  // Per slot: -1 when `offset` is into the arena; else the graph output (a
  // Concat's) whose own buffer, allocated per run and handed to the caller,
  // holds the slot at `offset` (its parts produced in place, no copy).
  std::vector<int> host;
  std::vector<DataType> type;
  std::vector<std::vector<int64_t>> dims;
  size_t num_planned = 0;
  size_t num_aliased = 0;  // planned slots inside another slot's bytes (views, slices, Concat parts)
};

struct MemoryPlanOptions {
  // Whether slots may share bytes: view outputs on their input, Concat inputs
  // inside the Concat's output, Slice/Split outputs inside their input. Off:
  // every planned slot has a block of its own (the reference for tests).
  bool share_buffers = true;
};

// `types` are the inferred types for this signature (CheckedGraph::types);
// `constants` the values known for it (CheckedGraph::constants; may be null),
// which place a Slice's output inside its input.
MemoryPlan PlanMemory(const ExecutionPlan& plan, const std::unordered_map<std::string, TypeInfo>& types,
                      const std::unordered_map<std::string, Tensor>* constants = nullptr,
                      const MemoryPlanOptions& options = {});

}  // namespace nee
