// .npy reading and writing, against files numpy.save wrote
// (make_format_fixtures.py; expected bytes in npy_expected.txt from numpy).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "format/npy.h"
#include "format_test_util.h"

namespace nee {
namespace {

using namespace testing_format;

struct Expected {
  std::string name, dtype;
  std::vector<int64_t> dims;
  std::string bytes;
};

std::vector<Expected> LoadExpected() {
  std::vector<Expected> out;
  std::ifstream in(DataPath("npy_expected.txt"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    Expected e;
    std::string dims, hex;
    ss >> e.name >> e.dtype >> dims >> hex;
    e.dims = ParseDims(dims);
    e.bytes = HexToBytes(hex);
    out.push_back(e);
  }
  return out;
}

DataType TypeForNumpy(const std::string& dtype) {
  std::string code = dtype.substr(1);
  if (code == "f2") return DataType::kFloat16;
  if (code == "f4") return DataType::kFloat;
  if (code == "f8") return DataType::kDouble;
  if (code == "i1") return DataType::kInt8;
  if (code == "i2") return DataType::kInt16;
  if (code == "i4") return DataType::kInt32;
  if (code == "i8") return DataType::kInt64;
  if (code == "u1") return DataType::kUint8;
  if (code == "u2") return DataType::kUint16;
  if (code == "u4") return DataType::kUint32;
  if (code == "u8") return DataType::kUint64;
  if (code == "b1") return DataType::kBool;
  return DataType::kUndefined;
}

TEST(FormatNpy, ReadsWhatNumpyWrote) {
  auto expected = LoadExpected();
  ASSERT_EQ(expected.size(), 14u);
  for (const Expected& e : expected) {
    SCOPED_TRACE(e.name);
    auto t = ReadNpyFile(DataPath("npy/" + e.name + ".npy"));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->dtype(), TypeForNumpy(e.dtype));
    EXPECT_EQ(t->dims(), e.dims);
    EXPECT_EQ(std::string(static_cast<const char*>(t->raw_data()), t->byte_size()), e.bytes);
  }
}

TEST(FormatNpy, WritesTheSameBytesAsNumpy) {
  TempDir tmp;
  for (const Expected& e : LoadExpected()) {
    SCOPED_TRACE(e.name);
    auto t = ReadNpyFile(DataPath("npy/" + e.name + ".npy"));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_TRUE(WriteNpyFile(t.value(), tmp / "out.npy").ok());
    EXPECT_TRUE(ReadFileBytes(tmp / "out.npy") == ReadFileBytes(DataPath("npy/" + e.name + ".npy")));
  }
}

TEST(FormatNpy, FormatVersions2And3) {
  auto v1 = ReadNpyFile(DataPath("npy/i32.npy"));
  ASSERT_TRUE(v1.ok());
  for (const char* name : {"npy/v2.npy", "npy/v3.npy"}) {
    auto t = ReadNpyFile(DataPath(name));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->dims(), v1->dims());
    EXPECT_EQ(t->data<int32_t>()[11], 11);
  }
}

TEST(FormatNpy, RefusesFortranOrderAndBigEndian) {
  auto fortran = ReadNpyFile(DataPath("npy/fortran.npy"));
  ASSERT_FALSE(fortran.ok());
  EXPECT_NE(fortran.status().message().find("Fortran"), std::string::npos);
  auto big = ReadNpyFile(DataPath("npy/big_endian.npy"));
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("big-endian"), std::string::npos);
}

TEST(FormatNpy, MalformedFilesFailCleanly) {
  std::string good = ReadFileBytes(DataPath("npy/f32.npy"));
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_FALSE(ReadNpyBytes(Bytes(good.substr(0, n))).ok()) << n;
  auto with_header = [](const std::string& dict, const std::string& data) {
    std::string s = std::string("\x93NUMPY\x01\x00", 8);
    s.push_back(static_cast<char>(dict.size() & 0xff));
    s.push_back(static_cast<char>(dict.size() >> 8));
    return s + dict + data;
  };
  for (const std::string& dict :
       {std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }"),
        std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
        std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"),  // 4 bytes short
        std::string("{'descr': '<U3', 'fortran_order': False, 'shape': (1,), }"),
        std::string("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }"),
        std::string("{'descr': '<f4', 'shape': (1,), }"), std::string("{'descr': '<f4', 'fortran_order': Maybe"),
        std::string("{'descr': '<f4"), std::string("not a dict")}) {
    SCOPED_TRACE(dict);
    EXPECT_FALSE(ReadNpyBytes(Bytes(with_header(dict, std::string(4, '\0')))).ok());
  }
}

TEST(FormatNpy, WriteRefusesUnsupportedTypes) {
  auto t = Tensor::Allocate(DataType::kBFloat16, {2});
  ASSERT_TRUE(t.ok());
  TempDir tmp;
  EXPECT_FALSE(WriteNpyFile(t.value(), tmp / "x.npy").ok());
  auto s = Tensor::Allocate(DataType::kString, {1});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(WriteNpyFile(s.value(), tmp / "s.npy").ok());
}

}  // namespace
}  // namespace nee
