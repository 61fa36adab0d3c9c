// Small tensor blocks a session reuses across nodes and runs.
//
// Tensors outside a run's arena (everything a control-flow body makes, and
// main-graph values the memory plan could not place) were each a 64-byte
// aligned heap allocation: glibc serves aligned requests outside its
// per-thread caches, so every one went through the slow allocator paths, and
// a model run per audio chunk whose If branches make ~50 small tensors spent
// a tenth of its run there. A block goes back to its size class's free list
// when the last tensor using it is gone (never earlier: a Loop's scan outputs
// stay valid while referenced), and the next request of that class takes it.
// Blocks above kMaxBlockBytes are left to BufferPool, which pools large ones.
#pragma once
#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace nee {

class BlockCache {
 public:
  static constexpr size_t kMinBlockBytes = 64;
  static constexpr size_t kMaxBlockBytes = size_t{64} << 10;
  // Free blocks kept, all classes together; more are returned to the heap.
  static constexpr size_t kMaxCachedBytes = size_t{8} << 20;
  static constexpr size_t kAlignment = 64;

  BlockCache() = default;
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;
  ~BlockCache();

  // Whether Take serves requests of this size.
  static bool Serves(size_t bytes) { return bytes <= kMaxBlockBytes; }
  // The capacity a request of `bytes` gets (a power of two, at least kMinBlockBytes).
  static size_t CapacityFor(size_t bytes);
  // A block of CapacityFor(bytes) bytes, 64-byte aligned, uninitialized;
  // null when memory is exhausted. Give it back with Give(block, capacity).
  void* Take(size_t bytes);
  void Give(void* block, size_t capacity);

  size_t cached_bytes() const;

 private:
  static constexpr size_t kClasses = 11;  // 64 B .. 64 KiB
  static size_t ClassOf(size_t capacity);

  mutable std::mutex mu_;
  std::array<std::vector<void*>, kClasses> free_;
  size_t cached_bytes_ = 0;
};

}  // namespace nee
