// Large tensor buffers reused across runs.
//
// A tensor that does not live in a session's arena (a graph output handed to
// the caller, an input copied in from Python or C, a value whose shape was
// unknown when the plan was made) gets its bytes from the heap on every run.
// Above the C library's mmap threshold each such block is a fresh mapping
// whose every page faults on first touch and is unmapped again when freed, so
// a model with a 200 KB output paid tens of microseconds a run for nothing
// (ONNX Runtime avoids this with its arena allocator). The pool keeps freed
// blocks of 64 KiB and more, up to a total size, and hands them out again for
// requests of about the same size. Blocks are 64-byte aligned.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace nee {

class BufferPool {
 public:
  // The process-wide pool (never destroyed: tensors may outlive static destructors).
  static BufferPool& Global();

  // At least `bytes` bytes, 64-byte aligned, uninitialized; null when memory is exhausted.
  // The block goes back to the pool (or to the heap) when the last owner drops it.
  std::shared_ptr<void> Acquire(size_t bytes);

  size_t cached_bytes() const;

  static constexpr size_t kMinPooledBytes = size_t{64} << 10;
  static constexpr size_t kMaxCachedBytes = size_t{128} << 20;

 private:
  void Release(void* block, size_t capacity);

  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // capacity -> block
  size_t cached_bytes_ = 0;
};

}  // namespace nee
