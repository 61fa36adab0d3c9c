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
}

// Bytes from numpy 2.x: np.save(f, np.array([['ab', 'h\u00e9llo'], ['', '\u4e2d\U0001F600']])) (dtype '<U5').
constexpr char kUnicodeNpyHex[] =
    "934e554d5059010076007b276465736372273a20273c5535272c2027666f727472616e5f6f72646572273a2046616c73652c20277368"
    "617065273a2028322c2032292c207d20202020202020202020202020202020202020202020202020202020202020202020202020202020"
    "2020202020202020202020202020202020200a610000006200000000000000000000000000000068000000e90000006c0000006c000000"
    "6f00000000000000000000000000000000000000000000002d4e000000f60100000000000000000000000000";
// np.save(f, np.array([b'xy', b'z'])) (dtype '|S2').
constexpr char kBytesNpyHex[] =
    "934e554d5059010076007b276465736372273a20277c5332272c2027666f727472616e5f6f72646572273a2046616c73652c20277368"
    "617065273a2028322c292c207d2020202020202020202020202020202020202020202020202020202020202020202020202020202020"
    "202020202020202020202020202020202020200a78797a00";

// scikit-learn models take and give string tensors (categories, class labels); nee run reads and writes them.
TEST(FormatNpy, ReadsAndWritesNumpyStrings) {
  auto unicode = ReadNpyBytes(Bytes(HexToBytes(kUnicodeNpyHex)));
  ASSERT_TRUE(unicode.ok()) << unicode.status().ToString();
  ASSERT_EQ(unicode.value().dtype(), DataType::kString);
  EXPECT_EQ(unicode.value().dims(), (std::vector<int64_t>{2, 2}));
  const std::string* u = unicode.value().data<std::string>();
  EXPECT_EQ(u[0], "ab");
  EXPECT_EQ(u[1], "h\xc3\xa9llo");
  EXPECT_EQ(u[2], "");
  EXPECT_EQ(u[3], "\xe4\xb8\xad\xf0\x9f\x98\x80");
  // Written back: the longest string has 5 code points, so the bytes are numpy's exactly.
  auto written = SerializeNpy(unicode.value());
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written.value(), HexToBytes(kUnicodeNpyHex));

  auto bytes = ReadNpyBytes(Bytes(HexToBytes(kBytesNpyHex)));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  ASSERT_EQ(bytes.value().dtype(), DataType::kString);
  EXPECT_EQ(bytes.value().data<std::string>()[0], "xy");
  EXPECT_EQ(bytes.value().data<std::string>()[1], "z");

  // Not valid UTF-8: written as fixed-width bytes ('|S').
  auto raw = Tensor::Allocate(DataType::kString, {2});
  ASSERT_TRUE(raw.ok());
  raw.value().data<std::string>()[0] = "xy";
  raw.value().data<std::string>()[1] = "\xff";
  auto raw_npy = SerializeNpy(raw.value());
  ASSERT_TRUE(raw_npy.ok());
  EXPECT_NE(raw_npy.value().find("'descr': '|S2'"), std::string::npos);
  auto back = ReadNpyBytes(Bytes(raw_npy.value()));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value().data<std::string>()[1], "\xff");
}

TEST(FormatNpy, MalformedStringFilesFailCleanly) {
  std::string good = HexToBytes(kUnicodeNpyHex);
  for (size_t n : {good.size() - 1, good.size() - 4, good.size() + 0}) {
    std::string cut = good.substr(0, n);
    if (n == good.size()) cut += "x";  // one byte too many
    EXPECT_FALSE(ReadNpyBytes(Bytes(cut)).ok()) << n;
  }
  // A code point beyond U+10FFFF.
  std::string bad = good;
  bad[bad.size() - 20 + 3] = '\x7f';  // the high byte of element 3's first code point
  EXPECT_FALSE(ReadNpyBytes(Bytes(bad)).ok());
  // Pickled object arrays are refused with a hint.
  std::string object = good;
  object.replace(object.find("<U5"), 3, "|O ");
  auto r = ReadNpyBytes(Bytes(object));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("object arrays"), std::string::npos);
}

}  // namespace
}  // namespace nee
