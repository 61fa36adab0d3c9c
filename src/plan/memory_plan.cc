#include "plan/memory_plan.h"

#include <algorithm>

namespace nee {

namespace {
size_t AlignUp(size_t n) { return (n + MemoryPlan::kAlignment - 1) / MemoryPlan::kAlignment * MemoryPlan::kAlignment; }

struct Block {
  int slot;         // the alias group's root slot
  int first, last;  // node indices: first produced at `first`, last read at `last`
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

// Greedy by size (largest first): place each block at the lowest offset that
// does not overlap any placed block alive at the same time. Writes the offset
// of each block's slot.
void PlaceBlocks(std::vector<Block>& blocks, MemoryPlan& mp) {
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
}

// Ops whose output holds exactly the input's bytes under another shape. When
// both sides are planned, the output takes the input's place and the kernel
// finds nothing to copy (CopyToOutput skips a copy onto itself).
bool IsViewNode(const PlannedNode& pn) {
  const std::string& d = pn.node->domain;
  if (!(d.empty() || d == "ai.onnx")) return false;
  const std::string& op = pn.node->op_type;
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity";
}

int FindRoot(std::vector<int>& group, int s) {
  while (group[s] != s) s = group[s] = group[group[s]];
  return s;
}

// Per slot: the slot whose block it shares (itself unless it is the planned
// output of a view node over a planned input of the same byte size).
std::vector<int> AliasGroups(const ExecutionPlan& plan, const std::vector<size_t>& bytes) {
  std::vector<int> group(plan.num_slots());
  for (size_t s = 0; s < group.size(); ++s) group[s] = static_cast<int>(s);
  for (const PlannedNode& pn : plan.nodes) {
    if (!IsViewNode(pn) || pn.inputs.empty() || pn.outputs.size() != 1) continue;
    int in = pn.inputs[0], out = pn.outputs[0];
    if (in < 0 || out < 0 || bytes[in] == 0 || bytes[out] != bytes[in]) continue;
    group[out] = FindRoot(group, in);
  }
  for (size_t s = 0; s < group.size(); ++s) group[s] = FindRoot(group, static_cast<int>(s));
  return group;
}

// The exact byte size of a slot's tensor when it can live in the arena, 0 otherwise.
size_t PlannableBytes(const ExecutionPlan& plan, const std::unordered_map<std::string, TypeInfo>& types,
                      const std::vector<bool>& safe_readers, size_t s, std::vector<int64_t>* dims) {
  int producer = plan.producer[s];
  if (producer < 0 || plan.is_graph_output[s] || !safe_readers[s]) return 0;
  if (plan.nodes[producer].has_subgraphs) return 0;
  auto it = types.find(plan.slot_names[s]);
  if (it == types.end() || !it->second.is_tensor() || !it->second.shape) return 0;
  DataType t = it->second.elem_type;
  if (t == DataType::kString || t == DataType::kUndefined) return 0;
  if (!ShapeIsStatic(*it->second.shape, dims)) return 0;
  auto count = CheckedElementCount(*dims);
  if (!count.ok()) return 0;
  size_t bytes = StorageBytes(t, count.value());
  return bytes > static_cast<size_t>(kMaxTensorBytes) ? 0 : bytes;
}
}  // namespace

MemoryPlan PlanMemory(const ExecutionPlan& plan, const std::unordered_map<std::string, TypeInfo>& types) {
  MemoryPlan mp;
  size_t n = plan.num_slots();
  mp.offset.assign(n, -1);
  mp.type.assign(n, DataType::kUndefined);
  mp.dims.assign(n, {});
  std::vector<bool> safe_readers = SlotsWithSafeReaders(plan, types);
  std::vector<size_t> bytes(n, 0);
  for (size_t s = 0; s < n; ++s) {
    std::vector<int64_t> dims;
    bytes[s] = PlannableBytes(plan, types, safe_readers, s, &dims);
    if (bytes[s] == 0) continue;
    mp.type[s] = types.at(plan.slot_names[s]).elem_type;
    mp.dims[s] = std::move(dims);
    mp.planned_bytes += bytes[s];
    ++mp.num_planned;
  }
  // One block per alias group, alive from its first producer to its last reader.
  std::vector<int> group = AliasGroups(plan, bytes);
  std::vector<int> block_of(n, -1);
  std::vector<Block> blocks;
  for (size_t s = 0; s < n; ++s) {
    if (bytes[s] == 0) continue;
    int first = plan.producer[s], last = std::max(plan.last_use[s], first);
    int& b = block_of[group[s]];
    if (b < 0) {
      b = static_cast<int>(blocks.size());
      blocks.push_back({group[s], first, last, AlignUp(bytes[s])});
    } else {
      blocks[b].first = std::min(blocks[b].first, first);
      blocks[b].last = std::max(blocks[b].last, last);
    }
  }
  PlaceBlocks(blocks, mp);
  for (size_t s = 0; s < n; ++s)
    if (bytes[s] != 0) mp.offset[s] = mp.offset[group[s]];
  return mp;
}

}  // namespace nee
