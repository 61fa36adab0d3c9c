// SHA-256 against Python's hashlib. The expected digests were computed with:
//   import hashlib
//   cases = {'empty': b'', 'abc': b'abc', 'a55': b'a'*55, 'a56': b'a'*56, 'a64': b'a'*64,
//            'a119': b'a'*119, 'pattern1000': bytes((i*31+7) % 256 for i in range(1000)),
//            'million_a': b'a'*1000000}
//   for k, v in cases.items(): print(k, hashlib.sha256(v).hexdigest())
// 55/56 bytes straddle the one-block padding limit, 64 and 119 fill blocks
// exactly or almost, the others span many blocks.
#include "base/sha256.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace nee {
namespace {

std::string Pattern1000() {
  std::string s;
  for (int i = 0; i < 1000; ++i) s += static_cast<char>((i * 31 + 7) % 256);
  return s;
}

struct Case {
  std::string data;
  const char* hex;
};

std::vector<Case> Cases() {
  return {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {std::string(55, 'a'), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {std::string(56, 'a'), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {std::string(64, 'a'), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {std::string(119, 'a'), "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {Pattern1000(), "5097e7d587352f5097062ae679f37bda5802d9f875aba14c8cb4d1a188ada179"},
      {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
}

TEST(Sha256, MatchesHashlibInOneUpdate) {
  for (const Case& c : Cases()) EXPECT_EQ(Sha256Hex(c.data.data(), c.data.size()), c.hex) << c.data.size() << " bytes";
}

TEST(Sha256, PiecewiseUpdatesGiveTheSameDigest) {
  for (const Case& c : Cases()) {
    for (size_t piece : {1, 3, 63, 64, 65, 1000}) {
      Sha256 hash;
      for (size_t at = 0; at < c.data.size(); at += piece) hash.Update(c.data.substr(at, piece));
      EXPECT_EQ(hash.HexFinal(), c.hex) << c.data.size() << " bytes in pieces of " << piece;
    }
  }
}

TEST(Sha256, HashesAFileAndReportsAMissingOne) {
  const std::string path = ::testing::TempDir() + "/sha256_test.bin";
  const std::string data = Pattern1000();
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(data.data(), 1, data.size(), f);
  std::fclose(f);
  auto digest = Sha256OfFile(path);
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  EXPECT_EQ(*digest, "5097e7d587352f5097062ae679f37bda5802d9f875aba14c8cb4d1a188ada179");
  std::remove(path.c_str());
  auto missing = Sha256OfFile(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("sha256_test.bin"), std::string::npos);
}

}  // namespace
}  // namespace nee
