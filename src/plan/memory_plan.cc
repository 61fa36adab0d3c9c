#include "plan/memory_plan.h"

#include <algorithm>

#include "ops/blocked_conv.h"
#include "plan/part_offsets.h"

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

// Slots that share memory: each slot lies at `offset` bytes into its
// parent's bytes; a root (parent == itself) gets a block of its own.
struct AliasForest {
  std::vector<int> parent;
  std::vector<size_t> offset;

  explicit AliasForest(size_t n) : parent(n), offset(n, 0) {
    for (size_t s = 0; s < n; ++s) parent[s] = static_cast<int>(s);
  }
  // The root of s, and s's byte offset in it (paths are compressed).
  std::pair<int, size_t> Find(int s) {
    if (parent[s] == s) return {s, 0};
    auto [root, parent_offset] = Find(parent[s]);
    parent[s] = root;
    offset[s] += parent_offset;
    return {root, offset[s]};
  }
  // Places the group rooted at `root` at `at` bytes into `host`'s group.
  void Attach(int root, int host, size_t at) {
    auto [host_root, host_offset] = Find(host);
    parent[root] = host_root;
    offset[root] = host_offset + at;
  }
};

// Moves the group of Concat input i into the Concat's output so that the
// input lands at its part, at[i] bytes in, when the group's bytes cover only
// whole parts whose inputs all lie in that group exactly where their parts
// are (e.g. the outputs of a Split feeding the Concat in order, or just the
// input itself); otherwise the Concat would copy a part over bytes of the
// group that may still be read.
void MoveIntoConcat(const PlannedNode& pn, const std::vector<size_t>& at, size_t i, const std::vector<size_t>& bytes,
                    const std::vector<bool>& output_host, AliasForest& forest) {
  const int out = pn.outputs[0];
  auto [root, offset_in_root] = forest.Find(pn.inputs[i]);
  if (root == forest.Find(out).first) return;  // already there (an input repeated, or a part of a group moved)
  if (output_host[root]) return;               // a graph output's buffer stays its own
  if (at[i] < offset_in_root) return;
  const size_t begin = at[i] - offset_in_root, end = begin + bytes[root];
  if (begin % MemoryPlan::kAlignment != 0 || end > bytes[out]) return;
  for (size_t j = 0; j < at.size(); ++j) {
    const size_t part_end = at[j] + bytes[pn.inputs[j]];
    if (part_end <= begin || at[j] >= end) continue;  // outside the group's bytes
    if (at[j] < begin || part_end > end) return;       // a part only partly covered
    if (forest.Find(pn.inputs[j]) != std::make_pair(root, at[j] - begin)) return;
  }
  forest.Attach(root, out, begin);
}

// Places node i's output on the bytes of an input its kernels may overwrite
// (ops/blocked_conv.h, BlockedConvOverwritableInput) when that input is
// planned in the arena, the output's size, not another input of node i nor
// read after it, and sharing its bytes with nothing read at node i or after.
void OutputOverInput(const ExecutionPlan& plan, int i, const std::unordered_map<std::string, TypeInfo>& types,
                     const std::vector<size_t>& bytes, const std::vector<bool>& output_host, AliasForest& forest) {
  const PlannedNode& pn = plan.nodes[i];
  auto input_shape = [&](size_t k) -> const Shape* {
    if (k >= pn.inputs.size() || pn.inputs[k] < 0) return nullptr;
    auto it = types.find(plan.slot_names[pn.inputs[k]]);
    return it != types.end() && it->second.shape ? &*it->second.shape : nullptr;
  };
  const int k = BlockedConvOverwritableInput(*pn.node, input_shape);
  if (k < 0 || static_cast<size_t>(k) >= pn.inputs.size() || pn.outputs.size() != 1) return;
  const int in = pn.inputs[k], out = pn.outputs[0];
  if (in < 0 || out < 0 || bytes[in] == 0 || bytes[in] != bytes[out]) return;
  if (output_host[in] || output_host[out] || plan.last_use[in] != i) return;
  for (size_t j = 0; j < pn.inputs.size(); ++j)  // also another input (x = z): read while the output is written
    if (static_cast<int>(j) != k && pn.inputs[j] == in) return;
  // The input's group may hold slots read before node i (a residual that took
  // an earlier node's bytes), none read at or after it; the output is new.
  const int in_root = forest.Find(in).first;
  if (forest.Find(out).first != out) return;
  for (size_t s = 0; s < forest.parent.size(); ++s) {
    const int slot = static_cast<int>(s), root = forest.Find(slot).first;
    if (root == in_root && slot != in && plan.last_use[s] >= i) return;
    if (root == out && slot != out) return;
  }
  forest.Attach(out, in, 0);
}

// Per slot: its root slot and byte offset in it. View ops' outputs share
// their input's bytes, and so do contiguous Slice/Split outputs at their
// offset; Concat inputs live inside the Concat's output where they can
// (MoveIntoConcat: each input once, at a 64-byte aligned offset).
std::vector<std::pair<int, size_t>> AliasGroups(const ExecutionPlan& plan, const SlotLayout& slots,
                                                const std::unordered_map<std::string, TypeInfo>& types,
                                                const std::unordered_map<std::string, Tensor>* constants,
                                                const std::vector<bool>& output_host) {
  const std::vector<size_t>& bytes = slots.bytes;
  AliasForest forest(plan.num_slots());
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const PlannedNode& pn = plan.nodes[i];
    OutputOverInput(plan, static_cast<int>(i), types, bytes, output_host, forest);
    // An output is still the root of a group of its own here: it joins
    // others only at its producer (this node) or at a later Concat.
    if (IsViewNode(pn) && !pn.inputs.empty() && pn.outputs.size() == 1) {
      int in = pn.inputs[0], out = pn.outputs[0];
      if (in >= 0 && out >= 0 && bytes[in] != 0 && bytes[out] == bytes[in]) forest.Attach(out, in, 0);
      continue;
    }
    std::vector<std::pair<int, size_t>> parts = SliceViewOffset(pn, plan, slots, constants);
    if (parts.empty()) parts = SplitViewOffsets(pn, slots);
    for (const auto& [out, at] : parts) forest.Attach(out, pn.inputs[0], at);
    const std::vector<size_t> at = ConcatPartOffsets(pn, slots);
    for (size_t i = 0; i < at.size(); ++i) MoveIntoConcat(pn, at, i, bytes, output_host, forest);
  }
  std::vector<std::pair<int, size_t>> group(plan.num_slots());
  for (size_t s = 0; s < group.size(); ++s) group[s] = forest.Find(static_cast<int>(s));
  return group;
}

// The exact byte size of a slot's tensor when it can live in the arena, 0 otherwise.
// A graph output counts only when `as_host` (a Concat's output that may hold its parts).
size_t PlannableBytes(const ExecutionPlan& plan, const std::unordered_map<std::string, TypeInfo>& types,
                      const std::vector<bool>& safe_readers, size_t s, std::vector<int64_t>* dims, bool as_host) {
  int producer = plan.producer[s];
  if (producer < 0 || plan.is_graph_output[s] != as_host || !safe_readers[s]) return 0;
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

MemoryPlan PlanMemory(const ExecutionPlan& plan, const std::unordered_map<std::string, TypeInfo>& types,
                      const std::unordered_map<std::string, Tensor>* constants, const MemoryPlanOptions& options) {
  MemoryPlan mp;
  size_t n = plan.num_slots();
  mp.offset.assign(n, -1);
  mp.type.assign(n, DataType::kUndefined);
  mp.dims.assign(n, {});
  std::vector<bool> safe_readers = SlotsWithSafeReaders(plan, types);
  mp.host.assign(n, -1);
  // Graph outputs made by a Concat may hold their parts (their buffers are
  // the caller's, allocated per run): candidates, kept if a part joins them.
  std::vector<bool> output_host(n, false);
  for (const PlannedNode& pn : plan.nodes)
    if (IsConcatNode(pn) && pn.outputs.size() == 1 && pn.outputs[0] >= 0)
      output_host[pn.outputs[0]] = plan.is_graph_output[pn.outputs[0]] && options.share_buffers;
  std::vector<size_t> bytes(n, 0);
  for (size_t s = 0; s < n; ++s) {
    std::vector<int64_t> dims;
    bytes[s] = PlannableBytes(plan, types, safe_readers, s, &dims, output_host[s]);
    if (bytes[s] == 0) {
      output_host[s] = false;
      continue;
    }
    mp.type[s] = types.at(plan.slot_names[s]).elem_type;
    mp.dims[s] = std::move(dims);
  }
  // One block per alias group (the root's bytes), alive from its first
  // producer to its last reader.
  std::vector<std::pair<int, size_t>> group(n);
  for (size_t s = 0; s < n; ++s) group[s] = {static_cast<int>(s), 0};
  if (options.share_buffers)
    group = AliasGroups(plan, SlotLayout{bytes, mp.type, mp.dims}, types, constants, output_host);
  std::vector<bool> hosts_something(n, false);
  for (size_t s = 0; s < n; ++s)
    if (bytes[s] != 0 && group[s].first != static_cast<int>(s)) hosts_something[group[s].first] = true;
  for (size_t s = 0; s < n; ++s) {
    if (output_host[s] && !hosts_something[s]) bytes[s] = 0, output_host[s] = false;  // an output as before
    if (bytes[s] == 0) continue;
    mp.planned_bytes += bytes[s];
    ++mp.num_planned;
  }
  std::vector<int> block_of(n, -1);
  std::vector<Block> blocks;
  for (size_t s = 0; s < n; ++s) {
    if (bytes[s] == 0 || output_host[group[s].first]) continue;
    const int root = group[s].first;
    int first = plan.producer[s], last = std::max(plan.last_use[s], first);
    int& b = block_of[root];
    if (b < 0) {
      b = static_cast<int>(blocks.size());
      blocks.push_back({root, first, last, AlignUp(bytes[root])});
    } else {
      blocks[b].first = std::min(blocks[b].first, first);
      blocks[b].last = std::max(blocks[b].last, last);
    }
  }
  PlaceBlocks(blocks, mp);
  for (size_t s = 0; s < n; ++s) {
    if (bytes[s] == 0) continue;
    const int root = group[s].first;
    if (output_host[root]) mp.host[s] = root;
    mp.offset[s] = (output_host[root] ? 0 : mp.offset[root]) + static_cast<int64_t>(group[s].second);
    if (group[s].first != static_cast<int>(s)) ++mp.num_aliased;
  }
  return mp;
}

}  // namespace nee
