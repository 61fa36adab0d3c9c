#include "base/huge_pages.h"

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>

#if defined(__linux__)
#include <pthread.h>
#include <sys/mman.h>
#endif

namespace nee {

namespace {

constexpr size_t kChunk = size_t{2} << 20;  // one x86-64 huge page
constexpr size_t kAlign = 64;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

class HugePagePool {
 public:
  static HugePagePool& Global() {
    static HugePagePool* pool = [] {
      auto* p = new HugePagePool;  // never destroyed: buffers may outlive static destructors
#if defined(__linux__)
      // A sandbox child is forked without exec (base/sandbox.cc) and allocates from the pool: the lock
      // is held across fork so the child never inherits it taken by a thread it does not have.
      pthread_atfork([] { Global().mu_.lock(); }, [] { Global().mu_.unlock(); }, [] { Global().mu_.unlock(); });
#endif
      return p;
    }();
    return *pool;
  }

  void* Allocate(size_t bytes) {
    bytes = RoundUp(bytes == 0 ? 1 : bytes, kAlign);
    if (bytes > static_cast<size_t>(-1) - kChunk) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    if (current_ && Left(current_) >= bytes) return Carve(current_, bytes);
    // A new region of whole huge pages; what the buffer leaves of it serves the next ones when that is more
    // than the current region has left.
    char* base = NewChunk(RoundUp(bytes, kChunk));
    if (!base) return nullptr;
    void* p = Carve(base, bytes);
    if (!current_ || Left(base) > Left(current_)) {
      char* old = current_;
      current_ = base;
      if (old && chunks_[old].live == 0) FreeChunk(chunks_.find(old));
    }
    return p;
  }

  size_t BytesHeld() {
    std::lock_guard<std::mutex> lock(mu_);
    size_t bytes = 0;
    for (const auto& entry : chunks_) bytes += entry.second.size;
    return bytes;
  }

  void Free(void* block) {
    if (!block) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = chunks_.upper_bound(static_cast<char*>(block));
    if (it == chunks_.begin()) return;  // not ours
    it = std::prev(it);
    if (static_cast<char*>(block) >= it->first + it->second.size || --it->second.live > 0) return;
    if (it->first == current_) {
      it->second.used = 0;  // empty again: the next buffers start at its front
      return;
    }
    FreeChunk(it);
  }

 private:
  // A region of whole huge pages, buffers carved from its front.
  struct Chunk {
    size_t size = 0;  // bytes, a multiple of kChunk
    size_t used = 0;  // bytes handed out from the front
    size_t live = 0;  // buffers not yet freed
  };
  using ChunkMap = std::map<char*, Chunk>;

  size_t Left(char* base) { return chunks_[base].size - chunks_[base].used; }

  void* Carve(char* base, size_t bytes) {
    Chunk& c = chunks_[base];
    void* p = base + c.used;
    c.used += bytes;
    ++c.live;
    return p;
  }

  char* NewChunk(size_t size) {
    auto* base = static_cast<char*>(std::aligned_alloc(kChunk, size));
    if (!base) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(base, size, MADV_HUGEPAGE);  // advice only: ordinary pages where declined
#endif
    chunks_[base].size = size;
    return base;
  }

  void FreeChunk(ChunkMap::iterator it) {
    std::free(it->first);
    chunks_.erase(it);
  }

  std::mutex mu_;
  ChunkMap chunks_;
  char* current_ = nullptr;  // the region buffers are carved from now
};

}  // namespace

void* HugePageAllocate(size_t bytes) { return HugePagePool::Global().Allocate(bytes); }
void HugePageFree(void* block) { HugePagePool::Global().Free(block); }
size_t HugePageBytesHeld() { return HugePagePool::Global().BytesHeld(); }

}  // namespace nee
