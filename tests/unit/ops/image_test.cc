// ImageDecoder (opset 20). The test images and their expected pixels are in
// image_test_cases.inc, made by image_expected_gen.py: small images encoded
// with Pillow (or written byte by byte) and decoded by onnx.reference's
// ImageDecoder (see the generator for the few cases where the expectation is
// Pillow's RGB conversion or numpy instead).
//
// Each codec library is optional at build time; where one is missing, the
// cases of its format must fail with NotImplemented naming the library, and
// the tests check that instead of the pixels.
#include <cstdint>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace nee::testing {
namespace {

struct ImageCase {
  const char* name;
  const char* pixel_format;
  const char* encoded_hex;
  int64_t height, width, channels;
  const char* expected_hex;
};

struct HostileCase {
  const char* name;
  const char* encoded_hex;
};

#include "image_test_cases.inc"

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> bytes(hex.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return bytes;
}

Value Bytes(const std::vector<uint8_t>& bytes) {
  return Value(Tensor::FromVector<uint8_t>(bytes, {static_cast<int64_t>(bytes.size())}));
}

Node DecoderNode(const std::string& pixel_format) {
  return MakeNode("ImageDecoder", 1, 1, {StringAttr("pixel_format", pixel_format)});
}

Result<OpRun> Decode(const std::vector<uint8_t>& bytes, const std::string& pixel_format) {
  return RunOp(DecoderNode(pixel_format), 20, {Bytes(bytes)});
}

// The build lacks this format's codec library: the error must say which.
bool IsMissingCodec(const Result<OpRun>& r) {
  if (r.ok() || r.status().code() != StatusCode::kNotImplemented) return false;
  return r.status().message().find("which this build of nee was built without") != std::string::npos;
}

int64_t ChannelsOf(const std::string& pixel_format) { return pixel_format == "Grayscale" ? 1 : 3; }

TEST(ImageDecoder, DecodesLikeTheReference) {
  for (const ImageCase& c : kImageCases) {
    SCOPED_TRACE(c.name);
    auto r = Decode(FromHex(c.encoded_hex), c.pixel_format);
    if (IsMissingCodec(r)) continue;  // checked by the message (see IsMissingCodec)
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Tensor& out = r->outputs[0].tensor();
    ASSERT_EQ(out.dtype(), DataType::kUint8);
    ASSERT_EQ(out.dims(), (std::vector<int64_t>{c.height, c.width, c.channels}));
    const std::vector<uint8_t> expected = FromHex(c.expected_hex);
    ASSERT_EQ(static_cast<size_t>(out.num_elements()), expected.size());
    int mismatches = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      if (out.data<uint8_t>()[i] != expected[i] && ++mismatches <= 5)
        ADD_FAILURE() << "element " << i << ": expected " << int{expected[i]} << ", got " << int{out.data<uint8_t>()[i]};
    }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(ImageDecoder, ShapeRuleGivesChannels) {
  auto r = Decode(FromHex(kImageCases[0].encoded_hex), "Grayscale");
  if (IsMissingCodec(r)) r = Decode({'P', '5', ' ', '1', ' ', '1', ' ', '2', '5', '5', ' ', 7}, "Grayscale");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->inferred[0].shape.has_value());
  ASSERT_EQ(r->inferred[0].shape->size(), 3u);
  EXPECT_EQ((*r->inferred[0].shape)[2], Dim::Known(1));
  EXPECT_EQ(r->inferred[0].elem_type, DataType::kUint8);
}

// The spec: a stream that cannot be decoded gives an empty image.
void ExpectEmpty(const Result<OpRun>& r, int64_t channels) {
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outputs[0].tensor().dims(), (std::vector<int64_t>{0, 0, channels}));
}

TEST(ImageDecoder, UnknownOrEmptyStreamGivesEmptyImage) {
  ExpectEmpty(Decode({}, "RGB"), 3);
  ExpectEmpty(Decode({'h', 'e', 'l', 'l', 'o'}, "Grayscale"), 1);
  ExpectEmpty(Decode({0xFF, 0xD8}, "BGR"), 3);  // too short even for the JPEG magic
}

// Cut at half its length, every stream in the strict formats is undecodable.
TEST(ImageDecoder, TruncatedStreamsGiveEmptyImage) {
  for (const ImageCase& c : kImageCases) {
    const std::string name = c.name;
    if (name.rfind("jp2", 0) == 0 || name.rfind("j2k", 0) == 0) continue;  // OpenJPEG decodes partial codestreams
    SCOPED_TRACE(name);
    std::vector<uint8_t> bytes = FromHex(c.encoded_hex);
    bytes.resize(bytes.size() / 2);
    auto r = Decode(bytes, c.pixel_format);
    if (IsMissingCodec(r)) continue;
    ExpectEmpty(r, c.channels);
  }
}

// A result for hostile bytes: an image with the requested channels (maybe
// empty), or a clear error of the kinds the op documents. Never a crash.
void ExpectHandled(const Result<OpRun>& r, const std::string& pixel_format) {
  if (!r.ok()) {
    const StatusCode code = r.status().code();
    EXPECT_TRUE(code == StatusCode::kNotImplemented || code == StatusCode::kOutOfMemory) << r.status().ToString();
    return;
  }
  const Tensor& out = r->outputs[0].tensor();
  ASSERT_EQ(out.rank(), 3);
  EXPECT_EQ(out.dim(2), ChannelsOf(pixel_format));
}

TEST(ImageDecoder, EveryPrefixIsHandled) {
  for (const ImageCase& c : kImageCases) {
    SCOPED_TRACE(c.name);
    const std::vector<uint8_t> bytes = FromHex(c.encoded_hex);
    // Every prefix of the first 256 bytes (headers), then every 7th length.
    for (size_t n = 0; n < bytes.size(); n += n < 256 ? 1 : 7) {
      ExpectHandled(Decode(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)),
                           c.pixel_format),
                    c.pixel_format);
    }
  }
}

TEST(ImageDecoder, CorruptedBytesAreHandled) {
  uint64_t state = 12345;  // a fixed LCG: the same corruptions every run
  auto next = [&state]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  for (const ImageCase& c : kImageCases) {
    SCOPED_TRACE(c.name);
    const std::vector<uint8_t> original = FromHex(c.encoded_hex);
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<uint8_t> bytes = original;
      const int flips = 1 + static_cast<int>(next() % 4);
      for (int f = 0; f < flips; ++f) {
        // Keep the magic bytes so the format's decoder is the one exercised.
        const size_t at = 4 + next() % (bytes.size() - 4);
        bytes[at] = static_cast<uint8_t>(next());
      }
      ExpectHandled(Decode(bytes, c.pixel_format), c.pixel_format);
    }
  }
}

TEST(ImageDecoder, HugeDeclaredSizesAreRejectedBeforeAllocating) {
  for (const HostileCase& c : kHugeImages) {
    SCOPED_TRACE(c.name);
    auto r = Decode(FromHex(c.encoded_hex), "RGB");
    if (IsMissingCodec(r)) continue;
    ASSERT_FALSE(r.ok()) << "decoded " << r->outputs[0].tensor().Describe();
    EXPECT_EQ(r.status().code(), StatusCode::kOutOfMemory) << r.status().ToString();
    EXPECT_NE(r.status().message().find("more than the limit of 67108864 pixels"), std::string::npos)
        << r.status().message();
  }
}

TEST(ImageDecoder, InputAndAttributeErrors) {
  const std::vector<uint8_t> ppm = {'P', '6', ' ', '1', ' ', '1', ' ', '2', '5', '5', ' ', 1, 2, 3};
  auto ok = Decode(ppm, "BGR");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ExpectTensorNear<uint8_t>(ok->outputs[0].tensor(), {1, 1, 3}, {3, 2, 1});

  auto bad_format = Decode(ppm, "RGBA");
  ASSERT_FALSE(bad_format.ok());
  EXPECT_NE(bad_format.status().message().find("pixel_format must be"), std::string::npos);

  Value two_d(Tensor::FromVector<uint8_t>(ppm, {2, 7}));
  auto r = RunOp(DecoderNode("RGB"), 20, {two_d});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must be 1-D"), std::string::npos) << r.status().message();

  Value ints(Tensor::FromVector<int32_t>({1, 2, 3}, {3}));
  r = RunOp(DecoderNode("RGB"), 20, {ints});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must be uint8"), std::string::npos) << r.status().message();
}

TEST(ImageDecoder, UnsupportedVariantsSayWhat) {
  // PAM and RLE-compressed BMP are recognized but not decoded.
  auto pam = Decode({'P', '7', '\n', 'W', 'I', 'D', 'T', 'H', ' ', '1', '\n'}, "RGB");
  ASSERT_FALSE(pam.ok());
  EXPECT_EQ(pam.status().code(), StatusCode::kNotImplemented);
  EXPECT_NE(pam.status().message().find("PAM"), std::string::npos);

  std::vector<uint8_t> bmp(14 + 40 + 8, 0);
  bmp[0] = 'B', bmp[1] = 'M', bmp[10] = 54, bmp[14] = 40, bmp[18] = 1, bmp[22] = 1, bmp[26] = 1, bmp[28] = 8;
  bmp[30] = 1;  // BI_RLE8
  auto rle = Decode(bmp, "RGB");
  ASSERT_FALSE(rle.ok());
  EXPECT_EQ(rle.status().code(), StatusCode::kNotImplemented);
  EXPECT_NE(rle.status().message().find("BMP compression 1"), std::string::npos) << rle.status().message();
}

}  // namespace
}  // namespace nee::testing
