// Lineage records (format/lineage.h) and metadata edits (format/metadata_edit.h)
// on models built in memory. The expected digests were computed with Python's
// hashlib over the framing docs/lineage.md defines:
//   import hashlib, struct
//   w = struct.pack('<Q', 1) + b'w' + struct.pack('<QQ', 1, 1) + struct.pack('<q', 2) \
//       + struct.pack('<Q', 8) + struct.pack('<ff', 1.0, -2.0)
//   strings = struct.pack('<Q', 2) + b'hi' + struct.pack('<Q', 0)
//   s = struct.pack('<Q', 1) + b's' + struct.pack('<QQ', 8, 1) + struct.pack('<q', 2) \
//       + struct.pack('<Q', len(strings)) + strings
//   hashlib.sha256(w).hexdigest(); hashlib.sha256(w + s).hexdigest(); hashlib.sha256(b'abc').hexdigest()
#include "format/lineage.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "format/metadata_edit.h"
#include "format_test_util.h"

namespace nee {
namespace {

constexpr char kEmptySha[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr char kWSha[] = "04969c80a7881babac460092a825194603b7cba3292fceddc1785c15c9a282c0";
constexpr char kWAndStringsSha[] = "e68371c0b0932ed2b679196c849bea79485e6c7a5e4bd993d8a1d5ed2d5cda7c";
constexpr char kAbcSha[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

Model ModelWithWeight() {
  Model m;
  m.graph.initializers.push_back({"w", Tensor::FromVector<float>({1.0f, -2.0f}, {2}), ""});
  return m;
}

// Each test writes into its own fresh folder: ctest runs the tests of this file
// in parallel, and a shared path let one test truncate the file another was hashing.
std::string FileHolding(const testing_format::TempDir& dir, const std::string& bytes) {
  const std::string path = dir / "lineage_test_input.onnx";
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

TEST(Lineage, WeightsDigestFollowsTheDocumentedFraming) {
  EXPECT_EQ(WeightsSha256(Graph()), kEmptySha);
  Model m = ModelWithWeight();
  EXPECT_EQ(WeightsSha256(m.graph), kWSha);
  m.graph.initializers.push_back({"s", Tensor::FromVector<std::string>({"hi", ""}, {2}), ""});
  EXPECT_EQ(WeightsSha256(m.graph), kWAndStringsSha);
}

TEST(Lineage, AppendRecordsTheInputAndNumbersAfterTheLargest) {
  Model m = ModelWithWeight();
  testing_format::TempDir dir;
  auto recorder = LineageRecorder::Begin(FileHolding(dir, "abc"), m);
  ASSERT_TRUE(recorder.ok()) << recorder.status().ToString();
  m.metadata_props.emplace_back("nee.lineage.5", "not json");
  m.metadata_props.emplace_back("nee.lineage.x", "{}");
  ASSERT_TRUE(recorder->Append(m, "test", Json::Object().Set("p", Json::Number(1))).ok());
  ASSERT_EQ(m.metadata_props.back().first, "nee.lineage.6");
  const auto records = ReadLineage(m.metadata_props);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].key, "nee.lineage.5");
  EXPECT_NE(records[0].error, "");
  EXPECT_EQ(records[1].key, "nee.lineage.6");
  EXPECT_EQ(records[1].error, "");
  EXPECT_EQ(records[1].Field("input", "file"), "lineage_test_input.onnx");
  EXPECT_EQ(records[1].Field("input", "sha256"), kAbcSha);
  EXPECT_EQ(records[1].Field("input", "weights_sha256"), kWSha);
  EXPECT_EQ(records[1].Field("output", "weights_sha256"), kWSha);
  EXPECT_EQ(records[1].Summary().rfind("test (p=1) by nee ", 0), 0u) << records[1].Summary();
  EXPECT_EQ(records[2].key, "nee.lineage.x");  // not numbered: last
  EXPECT_FALSE(recorder->Append(m, "bad", Json::Array()).ok());
}

TEST(Lineage, VerifyComparesTheLastRecordWithTheWeightsAndEachOtherWithTheNext) {
  Model m = ModelWithWeight();
  testing_format::TempDir dir;
  const std::string path = FileHolding(dir, "abc");
  auto first = LineageRecorder::Begin(path, m);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->Append(m, "one", Json::Object()).ok());
  auto second = LineageRecorder::Begin(path, m);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->Append(m, "two", Json::Object()).ok());
  auto checks = VerifyLineage(m);
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_TRUE(checks[0].ok && checks[1].ok) << checks[0].message << "\n" << checks[1].message;

  // A weight changed after the last step: the last record mismatches.
  m.graph.initializers[0].tensor.data<float>()[0] = 3.0f;
  checks = VerifyLineage(m);
  EXPECT_TRUE(checks[0].ok);
  EXPECT_FALSE(checks[1].ok);
  EXPECT_NE(checks[1].message.find(WeightsSha256(m.graph)), std::string::npos) << checks[1].message;

  // Changed between the steps: the third record starts from other weights than the second left.
  auto third = LineageRecorder::Begin(path, m);
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(third->Append(m, "three", Json::Object()).ok());
  checks = VerifyLineage(m);
  ASSERT_EQ(checks.size(), 3u);
  EXPECT_TRUE(checks[0].ok);
  EXPECT_FALSE(checks[1].ok);
  EXPECT_TRUE(checks[2].ok);
}

TEST(MetadataEdit, SetsReplacesDeletesAndRefusesLineageKeys) {
  Model m;
  m.metadata_props = {{"a", "1"}, {"b", "2"}, {"nee.lineage.1", "{}"}};
  MetadataEdit edit;
  edit.set = {{"a", "10"}, {"c", "3"}};
  edit.remove = {"b"};
  edit.producer_name = "p";
  edit.model_version = 4;
  ASSERT_TRUE(ApplyMetadataEdit(m, edit).ok());
  const std::vector<std::pair<std::string, std::string>> expected = {{"a", "10"}, {"nee.lineage.1", "{}"}, {"c", "3"}};
  EXPECT_EQ(m.metadata_props, expected);
  EXPECT_EQ(m.producer_name, "p");
  EXPECT_EQ(m.model_version, 4);

  for (const MetadataEdit& bad : {MetadataEdit{{{"nee.lineage.2", "x"}}, {}, {}, {}, {}, {}, {}},
                                  MetadataEdit{{}, {"nee.lineage.1"}, {}, {}, {}, {}, {}},
                                  MetadataEdit{{}, {"missing"}, {}, {}, {}, {}, {}},
                                  MetadataEdit{{{"", "x"}}, {}, {}, {}, {}, {}, {}}}) {
    Model copy = m;
    Status status = ApplyMetadataEdit(copy, bad);
    EXPECT_FALSE(status.ok());
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace nee
