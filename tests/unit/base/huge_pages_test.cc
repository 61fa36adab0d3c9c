// base/huge_pages: buffers carved from shared 2 MiB chunks (big ones in
// chunks of their own) are 64-byte aligned, do not overlap, keep what is
// written to them, and a chunk whose buffers are all freed is reused or
// given back; the std::vector allocator works on it.
#include "base/huge_pages.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace nee {
namespace {

constexpr size_t kChunk = size_t{2} << 20;

TEST(HugePages, BuffersAreAlignedDistinctAndKeepTheirBytes) {
  // Sizes that share a chunk, fill it past its end, and exceed half of one.
  const std::vector<size_t> sizes = {0, 1, 63, 64, 100, 4096, 300000, 700000, 900000, kChunk / 2 + 1, 3 * kChunk + 5};
  std::vector<std::pair<uint8_t*, size_t>> blocks;
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto* p = static_cast<uint8_t*>(HugePageAllocate(sizes[i]));
    ASSERT_NE(p, nullptr) << sizes[i];
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << sizes[i];
    if (sizes[i] > kChunk / 2) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kChunk, 0u) << sizes[i];
    std::memset(p, static_cast<int>(i + 1), sizes[i]);
    blocks.emplace_back(p, sizes[i]);
  }
  std::vector<std::pair<uint8_t*, size_t>> sorted = blocks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i)
    EXPECT_GE(sorted[i].first, sorted[i - 1].first + sorted[i - 1].second) << "overlap at " << i;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto [p, n] = blocks[i];
    EXPECT_TRUE(std::all_of(p, p + n, [&](uint8_t b) { return b == static_cast<uint8_t>(i + 1); })) << n;
  }
  for (const auto& [p, n] : blocks) HugePageFree(p);
  HugePageFree(nullptr);  // nothing
}

TEST(HugePages, AFreedChunkIsUsedAgain) {
  // Fill a chunk exactly with two half-chunk buffers, so the next small buffer starts a new one.
  std::vector<void*> filler;
  for (int i = 0; i < 8; ++i) {
    auto* p = static_cast<char*>(HugePageAllocate(kChunk / 2));
    ASSERT_NE(p, nullptr);
    filler.push_back(p);
    if (reinterpret_cast<uintptr_t>(p) % kChunk != 0) continue;
    auto* q = static_cast<char*>(HugePageAllocate(kChunk / 2));
    ASSERT_NE(q, nullptr);
    filler.push_back(q);
    if (q == p + kChunk / 2) break;
  }
  void* a = HugePageAllocate(1000);
  void* b = HugePageAllocate(1000);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % kChunk, 0u);  // the front of a new chunk
  HugePageFree(a);
  HugePageFree(b);
  // a's chunk is still the current one and now empty: its front is handed out again.
  void* c = HugePageAllocate(1000);
  EXPECT_EQ(c, a);
  HugePageFree(c);
  for (void* p : filler) HugePageFree(p);
}

TEST(HugePages, VectorAllocator) {
  std::vector<float, HugePageAllocator<float>> v(100000, 1.5f);
  v.resize(400000, 2.5f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u);
  EXPECT_EQ(v[99999], 1.5f);
  EXPECT_EQ(v[399999], 2.5f);
  std::vector<float, HugePageAllocator<float>> w = v;
  EXPECT_EQ(w, v);
  EXPECT_NE(w.data(), v.data());
}

}  // namespace
}  // namespace nee
