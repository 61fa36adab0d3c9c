// base/populated_memory: aligned, writable end to end, given back when the last owner drops it.
#include "base/populated_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace nee {
namespace {

TEST(PopulatedMemory, AlignedAndWritableAtEverySize) {
  // Below, at and above the size from which a buffer is a mapping of its own.
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{4096}, (size_t{1} << 20) - 4, size_t{1} << 20,
                       (size_t{3} << 20) + 12}) {
    std::shared_ptr<void> p = AllocatePopulated(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % 64, 0u) << bytes;
    auto* bytes_ptr = static_cast<unsigned char*>(p.get());
    std::memset(bytes_ptr, 0xA5, bytes);
    for (size_t i = 0; i < bytes; i += 4093) EXPECT_EQ(bytes_ptr[i], 0xA5) << bytes << " at " << i;
    if (bytes > 0) EXPECT_EQ(bytes_ptr[bytes - 1], 0xA5) << bytes;
  }
}

TEST(PopulatedMemory, OwnersShareOneBuffer) {
  std::shared_ptr<void> first = AllocatePopulated(size_t{2} << 20);
  ASSERT_NE(first, nullptr);
  std::shared_ptr<void> second = first;
  first.reset();
  static_cast<float*>(second.get())[(size_t{2} << 20) / sizeof(float) - 1] = 1.5f;  // still mapped
  EXPECT_EQ(static_cast<float*>(second.get())[(size_t{2} << 20) / sizeof(float) - 1], 1.5f);
}

}  // namespace
}  // namespace nee
