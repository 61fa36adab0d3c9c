// Internal to ImageDecoder (image.cc, image_codecs.cc): the decoded image,
// the size limit and failure statuses every decoder shares, and the decoders
// that use the system codec libraries. Those live in image_codecs.cc, the only
// file that sees the codecs' headers and NEE_HAVE_* switches (CMakeLists.txt),
// so that adding or removing a codec rebuilds one file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace nee::image_decode {

// Largest image decoded: 8192 x 8192 pixels (192 MiB as RGB). A header may
// claim anything; this keeps a few hostile bytes from allocating gigabytes.
constexpr int64_t kMaxImagePixels = int64_t{1} << 26;

// 8-bit pixels, row-major (height, width, channels); channels is 1 (gray) or 3 (RGB).
struct DecodedImage {
  int64_t height = 0;
  int64_t width = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
};

// A stream that is not a decodable image. The kernel turns this status code
// (and only this one) into the spec's empty output; every other code is an error.
inline Status Undecodable(const char* format, const std::string& why) {
  return InvalidArgument(std::string(format) + " stream cannot be decoded: " + why);
}

inline bool WithinPixelLimit(int64_t width, int64_t height) {
  return width <= kMaxImagePixels && height <= kMaxImagePixels && width * height <= kMaxImagePixels;
}

inline Status CheckImageSize(const char* format, int64_t width, int64_t height) {
  if (width <= 0 || height <= 0)
    return Undecodable(format, "the header declares an empty image (" + std::to_string(width) + " x " +
                                   std::to_string(height) + ")");
  if (!WithinPixelLimit(width, height))
    return OutOfMemory(std::string(format) + " image declares " + std::to_string(width) + " x " + std::to_string(height) +
                       " pixels, more than the limit of " + std::to_string(kMaxImagePixels) + " pixels");
  return Status::Ok();
}

// Allocates the pixels of a checked size.
inline DecodedImage MakeImage(int64_t width, int64_t height, int channels) {
  DecodedImage image;
  image.width = width;
  image.height = height;
  image.channels = channels;
  image.pixels.resize(static_cast<size_t>(width * height * channels));
  return image;
}

// The decoders that need a system codec library (image_codecs.cc). Without the
// library each fails with NotImplemented naming it.
Result<DecodedImage> DecodeJpeg(const uint8_t* data, size_t size);
Result<DecodedImage> DecodePng(const uint8_t* data, size_t size);
Result<DecodedImage> DecodeTiff(const uint8_t* data, size_t size);
Result<DecodedImage> DecodeWebp(const uint8_t* data, size_t size);
Result<DecodedImage> DecodeJpeg2000(const uint8_t* data, size_t size, bool jp2_container);

}  // namespace nee::image_decode
