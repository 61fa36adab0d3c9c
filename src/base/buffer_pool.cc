#include "base/buffer_pool.h"

#include <new>

namespace nee {

namespace {
constexpr std::align_val_t kAlignment{64};
constexpr size_t kPage = 4096;

void* HeapAllocate(size_t bytes) { return ::operator new(bytes, kAlignment, std::nothrow); }
void HeapFree(void* p) { ::operator delete(p, kAlignment); }
}  // namespace

BufferPool& BufferPool::Global() {
  static BufferPool* pool = new BufferPool();
  return *pool;
}

std::shared_ptr<void> BufferPool::Acquire(size_t bytes) {
  if (bytes < kMinPooledBytes) {
    void* p = HeapAllocate(bytes > 0 ? bytes : 1);
    if (!p) return nullptr;
    return std::shared_ptr<void>(p, HeapFree);
  }
  // Whole pages, so that requests of nearly the same size share blocks.
  const size_t capacity = (bytes + kPage - 1) / kPage * kPage;
  void* block = nullptr;
  size_t block_capacity = capacity;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest cached block that fits, unless it would waste more than half of itself.
    auto it = free_.lower_bound(capacity);
    if (it != free_.end() && it->first <= 2 * capacity) {
      block = it->second;
      block_capacity = it->first;
      cached_bytes_ -= it->first;
      free_.erase(it);
    }
  }
  if (!block) block = HeapAllocate(capacity);
  if (!block) return nullptr;
  return std::shared_ptr<void>(block, [this, block_capacity](void* p) { Release(p, block_capacity); });
}

void BufferPool::Release(void* block, size_t capacity) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_bytes_ + capacity <= kMaxCachedBytes) {
      free_.emplace(capacity, block);
      cached_bytes_ += capacity;
      return;
    }
  }
  HeapFree(block);
}

size_t BufferPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_bytes_;
}

}  // namespace nee
