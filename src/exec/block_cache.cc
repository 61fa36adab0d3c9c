#include "exec/block_cache.h"

#include <new>

namespace nee {

namespace {
void* HeapAllocate(size_t bytes) {
  return ::operator new(bytes, std::align_val_t(BlockCache::kAlignment), std::nothrow);
}
void HeapFree(void* p) { ::operator delete(p, std::align_val_t(BlockCache::kAlignment)); }
}  // namespace

BlockCache::~BlockCache() {
  for (auto& list : free_)
    for (void* p : list) HeapFree(p);
}

size_t BlockCache::CapacityFor(size_t bytes) {
  size_t capacity = kMinBlockBytes;
  while (capacity < bytes) capacity <<= 1;
  return capacity;
}

size_t BlockCache::ClassOf(size_t capacity) {
  size_t c = 0;
  while ((kMinBlockBytes << c) < capacity) ++c;
  return c;
}

void* BlockCache::Take(size_t bytes) {
  const size_t capacity = CapacityFor(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<void*>& list = free_[ClassOf(capacity)];
    if (!list.empty()) {
      void* block = list.back();
      list.pop_back();
      cached_bytes_ -= capacity;
      return block;
    }
  }
  return HeapAllocate(capacity);
}

void BlockCache::Give(void* block, size_t capacity) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_bytes_ + capacity <= kMaxCachedBytes) {
      free_[ClassOf(capacity)].push_back(block);
      cached_bytes_ += capacity;
      return;
    }
  }
  HeapFree(block);
}

size_t BlockCache::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_bytes_;
}

}  // namespace nee
