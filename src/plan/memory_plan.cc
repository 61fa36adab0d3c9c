#include "plan/memory_plan.h"

#include <algorithm>

namespace nee {

namespace {
size_t AlignUp(size_t n) { return (n + MemoryPlan::kAlignment - 1) / MemoryPlan::kAlignment * MemoryPlan::kAlignment; }

struct Block {
  int slot;
  int first, last;  // node indices: produced at `first`, last read at `last`
  size_t bytes;
};

// A slot may live in the arena only if nothing can keep referring to its
// bytes past its last reader: readers that package inputs into sequences or
// optionals, or that run subgraphs, could. Returns, per slot, whether every
// reader is a plain tensor op.
std::vector<bool> SlotsWithSafeReaders(const ExecutionPlan& plan,
                                       const std::unordered_map<std::string, TypeInfo>& types) {
  std::vector<bool> safe(plan.num_slots(), true);
  for (const PlannedNode& pn : plan.nodes) {
    bool retains = pn.has_subgraphs;
    for (const std::string& out : pn.node->outputs) {
      auto it = types.find(out);
      if (!out.empty() && (it == types.end() || !it->second.is_tensor())) retains = true;
    }
    if (!retains) continue;
    for (int s : pn.inputs)
      if (s >= 0) safe[s] = false;
  }
  return safe;
}
}  // namespace

MemoryPlan PlanMemory(const ExecutionPlan& plan, const std::unordered_map<std::string, TypeInfo>& types) {
  MemoryPlan mp;
  size_t n = plan.num_slots();
  mp.offset.assign(n, -1);
  mp.type.assign(n, DataType::kUndefined);
  mp.dims.assign(n, {});
  std::vector<Block> blocks;
  std::vector<bool> safe_readers = SlotsWithSafeReaders(plan, types);
  for (size_t s = 0; s < n; ++s) {
    int producer = plan.producer[s];
    if (producer < 0 || plan.is_graph_output[s]) continue;
    if (plan.nodes[producer].has_subgraphs) continue;
    auto it = types.find(plan.slot_names[s]);
    if (it == types.end() || !it->second.is_tensor() || !it->second.shape) continue;
    DataType t = it->second.elem_type;
    if (t == DataType::kString || t == DataType::kUndefined) continue;
    std::vector<int64_t> dims;
    if (!ShapeIsStatic(*it->second.shape, &dims)) continue;
    auto count = CheckedElementCount(dims);
    if (!count.ok()) continue;
    size_t bytes = StorageBytes(t, count.value());
    if (bytes == 0 || bytes > static_cast<size_t>(kMaxTensorBytes)) continue;
    if (!safe_readers[s]) continue;
    int last = std::max(plan.last_use[s], producer);
    blocks.push_back({static_cast<int>(s), producer, last, AlignUp(bytes)});
    mp.type[s] = t;
    mp.dims[s] = std::move(dims);
    mp.planned_bytes += bytes;
  }
  // Greedy by size (largest first): place each block at the lowest offset
  // that does not overlap any placed block alive at the same time.
  std::sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.slot < b.slot;
  });
  std::vector<const Block*> placed;
  for (const Block& b : blocks) {
    std::vector<std::pair<size_t, size_t>> busy;  // [begin, end) of live overlapping blocks
    for (const Block* p : placed)
      if (!(p->last < b.first || b.last < p->first))
        busy.emplace_back(static_cast<size_t>(mp.offset[p->slot]), static_cast<size_t>(mp.offset[p->slot]) + p->bytes);
    std::sort(busy.begin(), busy.end());
    size_t candidate = 0;
    for (const auto& [begin, end] : busy) {
      if (candidate + b.bytes <= begin) break;
      candidate = std::max(candidate, end);
    }
    mp.offset[b.slot] = static_cast<int64_t>(candidate);
    mp.arena_bytes = std::max(mp.arena_bytes, candidate + b.bytes);
    placed.push_back(&b);
  }
  mp.num_planned = blocks.size();
  return mp;
}

}  // namespace nee
