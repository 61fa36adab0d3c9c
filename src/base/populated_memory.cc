#include "base/populated_memory.h"

#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace nee {

std::shared_ptr<void> AllocatePopulated(size_t bytes) {
#if defined(__linux__) && defined(MAP_POPULATE)
  constexpr size_t kOwnMapping = size_t{1} << 20;
  if (bytes >= kOwnMapping) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    return std::shared_ptr<void>(p, [bytes](void* q) { ::munmap(q, bytes); });
  }
#endif
  void* p = ::operator new(bytes > 0 ? bytes : 1, std::align_val_t(64), std::nothrow);
  if (!p) return nullptr;
  return std::shared_ptr<void>(p, [](void* q) { ::operator delete(q, std::align_val_t(64)); });
}

}  // namespace nee
