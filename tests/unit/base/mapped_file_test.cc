// ReleaseFileBackedPages drops the resident pages of a mapped model file and
// leaves the bytes readable, and leaves any other memory alone.
#include "base/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace nee {
namespace {

// The resident size (kB) of the mapping that starts at `start`, from /proc/self/smaps.
long ResidentKb(const void* start) {
  std::ifstream smaps("/proc/self/smaps");
  char head[32];
  std::snprintf(head, sizeof(head), "%lx-", reinterpret_cast<unsigned long>(start));
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    if (line.rfind(head, 0) == 0) in_mapping = true;
    else if (in_mapping && line.rfind("Rss:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

TEST(MappedFile, ReleasedPagesLeaveResidencyButKeepTheBytes) {
  const std::string path = ::testing::TempDir() + "nee_mapped_release.bin";
  std::vector<unsigned char> bytes(1 << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 3);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const uint8_t* data = file.value()->data();
  unsigned sum = 0;
  for (size_t i = 0; i < bytes.size(); i += 64) sum += data[i];  // touch every page
  EXPECT_GT(sum, 0u);
  const long before = ResidentKb(data);
  ReleaseFileBackedPages(data + 100, bytes.size() - 200);  // partial first and last pages are kept
  const long after = ResidentKb(data);
  if (before >= 0) EXPECT_LT(after, before / 2) << "resident kB before " << before << ", after " << after;
  EXPECT_EQ(0, std::memcmp(data, bytes.data(), bytes.size()));  // read back from the file
  std::remove(path.c_str());
}

TEST(MappedFile, ReleasingOtherMemoryChangesNothing) {
  std::vector<float> heap(1 << 18, 1.5f);
  ReleaseFileBackedPages(heap.data(), heap.size() * sizeof(float));
  for (float v : heap) ASSERT_EQ(v, 1.5f);
  auto copy = MappedFile::FromBytes(heap.data(), heap.size() * sizeof(float));  // a model from memory
  ReleaseFileBackedPages(copy->data(), copy->size());
  EXPECT_EQ(0, std::memcmp(copy->data(), heap.data(), copy->size()));
}

}  // namespace
}  // namespace nee
