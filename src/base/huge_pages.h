// Long-lived buffers that every run reads from end to end (a session's packed
// weights, its activation arena) on transparent huge pages.
//
// On 4 KiB pages a run of MobileNetV2 touches ~3,500 weight pages and ~2,500
// arena pages: more than the second-level TLB holds, and the hardware
// prefetchers stop at every page boundary. Between two runs of a shared
// machine the caches and the TLB go cold, so each run pays those misses
// again. The allocator carves buffers one after the other out of regions of
// whole 2 MiB pages advised as huge (MADV_HUGEPAGE; the system may decline,
// then they are ordinary pages), so neighbouring layers' weights share a page
// and no buffer rounds its own size up to a page: a buffer that does not fit
// in what is left of the current region starts a new one, big enough for it,
// whose rest serves the next buffers. A region is freed when the last buffer
// in it is (and it is no longer the current one).
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace nee {

// At least `bytes` bytes, 64-byte aligned, uninitialized; null when memory is exhausted.
void* HugePageAllocate(size_t bytes);
// Gives back a block from HugePageAllocate (null: nothing).
void HugePageFree(void* block);
// The bytes of the regions the allocator holds now (freed buffers' regions not yet given back included).
size_t HugePageBytesHeld();

// For std::vector: vector<float, HugePageAllocator<float>>.
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    void* p = HugePageAllocate(n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { HugePageFree(p); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const HugePageAllocator<U>&) const { return false; }
};

// A session's packed weights: every run reads them end to end.
template <class T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace nee
