// base/huge_pages: buffers carved one after the other from regions of whole
// 2 MiB pages are 64-byte aligned, do not overlap, keep what is written to
// them, and regions whose buffers are all freed are used again or given back
// (what the allocator holds does not grow); the std::vector allocator works on it.
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

TEST(HugePages, FreedRegionsAreUsedAgainOrGivenBack) {
  const size_t before = HugePageBytesHeld();
  // Many times more than any region holds, a few buffers alive at a time.
  std::vector<void*> alive;
  for (int i = 0; i < 2000; ++i) {
    void* p = HugePageAllocate(static_cast<size_t>(50000 + 997 * (i % 300)));
    ASSERT_NE(p, nullptr);
    alive.push_back(p);
    if (alive.size() == 4) {
      for (void* q : alive) HugePageFree(q);
      alive.clear();
    }
  }
  for (void* q : alive) HugePageFree(q);
  // 2000 buffers of 50-350 KB are 400 MB; what is held now is the current region at most.
  EXPECT_LE(HugePageBytesHeld(), before + 2 * kChunk);
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
