// Operator family: image decoding.
//
//   ImageDecoder (20): an encoded image (uint8, 1-D) -> (height, width, C) uint8,
//                      C = 3 for pixel_format RGB / BGR, 1 for Grayscale.
//
// The format is told by the stream's first bytes. JPEG, PNG, TIFF, WebP and
// JPEG 2000 are decoded by the system codec libraries, each optional at build
// time (NEE_HAVE_LIBJPEG, ...: see CMakeLists.txt); a format whose library is
// missing fails with NotImplemented naming the format and the library. BMP and
// PNM are small fixed formats read here, every offset bounds-checked.
//
// Every decoder produces 8-bit gray or RGB. The requested pixel format is made
// from that the way the ONNX reference (Pillow) does it: RGB -> gray with
// Pillow's "L" conversion (ITU-R 601-2 weights in 16-bit fixed point), gray ->
// RGB by replication, alpha dropped. JPEG uses libjpeg's defaults, which are
// what the spec asks for: the accurate integer DCT and "fancy" (triangular)
// chroma upsampling; that is also how Pillow's bundled libjpeg-turbo decodes,
// so results match the reference bit for bit.
//
// Failures follow the spec: a stream that cannot be decoded (unknown format,
// corrupt or truncated data) gives an empty (0, 0, C) image. Errors instead:
// a missing codec library or an unsupported variant of a format
// (NotImplemented), and an image whose header declares more than
// kMaxImagePixels pixels (OutOfMemory; checked before any pixel buffer is
// allocated). The C libraries never get to abort the process: libjpeg and
// allocated). The C libraries never get to abort the process (image_codecs.cc,
// which holds the decoders that use them).
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/image_decode.h"

namespace nee {
namespace {

using namespace image_decode;  // NOLINT: the decoders and their shared helpers

// Pillow's RGB -> "L": (R * 19595 + G * 38470 + B * 7471 + 0x8000) >> 16.
uint8_t PillowLuma(uint8_t r, uint8_t g, uint8_t b) {
  return static_cast<uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

uint32_t ReadLe16(const uint8_t* p) { return p[0] | (uint32_t{p[1]} << 8); }
uint32_t ReadLe32(const uint8_t* p) { return ReadLe16(p) | (ReadLe16(p + 2) << 16); }

// ---- BMP (read here) -----------------------------------------------------------------
// Windows and OS/2 bitmaps: 1/4/8-bit palette, 16/32-bit (default or
// BI_BITFIELDS masks) and 24-bit, bottom-up or top-down. RLE and embedded
// JPEG/PNG compression are not supported.

// One channel of a BI_BITFIELDS mask: where it is and how to scale it to 8 bits.
struct BitField {
  uint32_t mask = 0;
  int shift = 0;
  uint32_t max = 0;  // mask >> shift
  static Result<BitField> Of(uint32_t mask) {
    BitField f;
    f.mask = mask;
    if (mask == 0) return f;
    while (((mask >> f.shift) & 1u) == 0) ++f.shift;
    f.max = mask >> f.shift;
    if ((f.max & (f.max + 1)) != 0) return Undecodable("BMP", "a color mask is not contiguous");
    return f;
  }
  uint8_t Extract(uint32_t pixel) const {
    if (max == 0) return 0;
    const uint32_t v = (pixel & mask) >> shift;
    return static_cast<uint8_t>(max == 255 ? v : static_cast<uint64_t>(v) * 255 / max);
  }
};

Result<DecodedImage> DecodeBmp(const uint8_t* data, size_t size) {
  constexpr size_t kFileHeader = 14;
  if (size < kFileHeader + 4) return Undecodable("BMP", "truncated header");
  const uint64_t pixel_offset = ReadLe32(data + 10);
  const uint32_t header_size = ReadLe32(data + 14);
  if (header_size < 12 || header_size > size - kFileHeader) return Undecodable("BMP", "bad info header size");
  const uint8_t* h = data + kFileHeader;
  int64_t width = 0, height = 0;
  uint32_t bpp = 0, compression = 0, colors_used = 0;
  size_t palette_entry = 4;
  if (header_size == 12) {  // OS/2 BITMAPCOREHEADER
    width = ReadLe16(h + 4);
    height = static_cast<int16_t>(ReadLe16(h + 6));
    bpp = ReadLe16(h + 10);
    palette_entry = 3;
  } else {
    if (header_size < 40) return Undecodable("BMP", "bad info header size");
    width = static_cast<int32_t>(ReadLe32(h + 4));
    height = static_cast<int32_t>(ReadLe32(h + 8));
    bpp = ReadLe16(h + 14);
    compression = ReadLe32(h + 16);
    colors_used = ReadLe32(h + 32);
  }
  const bool top_down = height < 0;
  height = top_down ? -height : height;
  NEE_RETURN_IF_ERROR(CheckImageSize("BMP", width, height));
  constexpr uint32_t kRgb = 0, kBitfields = 3, kAlphaBitfields = 6;
  if (compression != kRgb && compression != kBitfields && compression != kAlphaBitfields)
    return NotImplemented("BMP compression " + std::to_string(compression) +
                          " (RLE or embedded JPEG/PNG) is not supported by ImageDecoder");
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32)
    return Undecodable("BMP", "unsupported bit depth " + std::to_string(bpp));
  if (compression != kRgb && bpp != 16 && bpp != 32) return Undecodable("BMP", "bit fields need 16 or 32 bits per pixel");

  // Color masks for 16/32-bit pixels: in the header (V2 and later) or right after a 40-byte one.
  std::array<BitField, 3> fields;
  if (bpp == 16 || bpp == 32) {
    uint32_t masks[3] = {0x7C00, 0x03E0, 0x001F};  // BI_RGB 16-bit: 5-5-5
    if (bpp == 32) masks[0] = 0xFF0000, masks[1] = 0xFF00, masks[2] = 0xFF;
    if (compression != kRgb) {
      const uint64_t at = kFileHeader + 40;
      if (at + 12 > size) return Undecodable("BMP", "truncated color masks");
      for (int c = 0; c < 3; ++c) masks[c] = ReadLe32(data + at + 4 * c);
    }
    for (int c = 0; c < 3; ++c) {
      NEE_ASSIGN_OR_RETURN(fields[c], BitField::Of(masks[c]));
    }
  }

  // The palette follows the headers (and a 40-byte header's masks).
  std::vector<std::array<uint8_t, 3>> palette;
  if (bpp <= 8) {
    const uint64_t max_colors = uint64_t{1} << bpp;
    const uint64_t count = colors_used == 0 ? max_colors : std::min<uint64_t>(colors_used, max_colors);
    const uint64_t at = kFileHeader + header_size + (header_size == 40 && compression != kRgb ? 12 : 0);
    if (at + count * palette_entry > size) return Undecodable("BMP", "truncated palette");
    palette.resize(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) {
      const uint8_t* e = data + at + i * palette_entry;
      palette[static_cast<size_t>(i)] = {e[2], e[1], e[0]};
    }
  }

  const uint64_t stride = (static_cast<uint64_t>(width) * bpp + 31) / 32 * 4;
  if (pixel_offset > size || stride * static_cast<uint64_t>(height) > size - pixel_offset)
    return Undecodable("BMP", "the pixel data is truncated");
  DecodedImage image = MakeImage(width, height, 3);
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t* row = data + pixel_offset + stride * static_cast<uint64_t>(top_down ? y : height - 1 - y);
    uint8_t* out = image.pixels.data() + y * width * 3;
    for (int64_t x = 0; x < width; ++x, out += 3) {
      switch (bpp) {
        case 1: case 4: case 8: {
          const int64_t bit = x * bpp;
          const uint32_t index = (row[bit / 8] >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1);
          // An index past the palette reads as black.
          const std::array<uint8_t, 3> color = index < palette.size() ? palette[index] : std::array<uint8_t, 3>{0, 0, 0};
          std::copy(color.begin(), color.end(), out);
          break;
        }
        case 24:
          out[0] = row[x * 3 + 2], out[1] = row[x * 3 + 1], out[2] = row[x * 3];
          break;
        default: {
          const uint32_t pixel = bpp == 16 ? ReadLe16(row + x * 2) : ReadLe32(row + x * 4);
          for (int c = 0; c < 3; ++c) out[c] = fields[c].Extract(pixel);
          break;
        }
      }
    }
  }
  return image;
}

// ---- PNM (read here) -----------------------------------------------------------------
// PBM, PGM and PPM, plain (P1-P3) and raw (P4-P6); samples wider than 8 bits
// and maxvals other than 255 are scaled to 0..255.

class PnmReader {
 public:
  PnmReader(const uint8_t* data, size_t size) : data_(data), size_(size), pos_(2) {}

  // Skips whitespace and '#' comments.
  void SkipSpace() {
    while (pos_ < size_) {
      if (data_[pos_] == '#') {
        while (pos_ < size_ && data_[pos_] != '\n' && data_[pos_] != '\r') ++pos_;
      } else if (IsSpace(data_[pos_])) {
        ++pos_;
      } else {
        break;
      }
    }
  }
  // A decimal number of at most `limit`.
  Result<int64_t> Number(int64_t limit, const char* what) {
    SkipSpace();
    if (pos_ >= size_ || data_[pos_] < '0' || data_[pos_] > '9') return Undecodable("PNM", std::string("missing ") + what);
    int64_t v = 0;
    while (pos_ < size_ && data_[pos_] >= '0' && data_[pos_] <= '9') {
      v = v * 10 + (data_[pos_++] - '0');
      if (v > limit) return Undecodable("PNM", std::string(what) + " is too large");
    }
    return v;
  }
  // One plain-PBM bit: '0' or '1', separators optional.
  Result<int> Bit() {
    SkipSpace();
    if (pos_ >= size_ || (data_[pos_] != '0' && data_[pos_] != '1')) return Undecodable("PNM", "missing or bad pixel");
    return data_[pos_++] - '0';
  }
  // The single whitespace byte that ends a raw header.
  Status EndRawHeader() {
    if (pos_ >= size_ || !IsSpace(data_[pos_])) return Undecodable("PNM", "no whitespace after the header");
    ++pos_;
    return Status::Ok();
  }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return data_ + pos_; }

 private:
  static bool IsSpace(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
  const uint8_t* data_;
  size_t size_;
  size_t pos_;
};

Result<DecodedImage> DecodePnm(const uint8_t* data, size_t size) {
  const char kind = static_cast<char>(data[1]);
  const bool bitmap = kind == '1' || kind == '4', gray = kind == '2' || kind == '5';
  const bool plain = kind <= '3';
  PnmReader reader(data, size);
  // Any size parses (the pixel limit below gives the clear error); 2^40 keeps the arithmetic in range.
  constexpr int64_t kMaxSide = int64_t{1} << 40;
  NEE_ASSIGN_OR_RETURN(int64_t width, reader.Number(kMaxSide, "width"));
  NEE_ASSIGN_OR_RETURN(int64_t height, reader.Number(kMaxSide, "height"));
  int64_t maxval = 1;
  if (!bitmap) {
    NEE_ASSIGN_OR_RETURN(maxval, reader.Number(65535, "maxval"));
    if (maxval < 1) return Undecodable("PNM", "maxval must be 1 to 65535");
  }
  NEE_RETURN_IF_ERROR(CheckImageSize("PNM", width, height));
  if (!plain) NEE_RETURN_IF_ERROR(reader.EndRawHeader());
  const int channels = (bitmap || gray) ? 1 : 3;
  DecodedImage image = MakeImage(width, height, channels);
  const int64_t samples = width * height * channels;
  auto scale = [maxval](int64_t v) {
    v = std::min(v, maxval);
    return static_cast<uint8_t>(maxval == 255 ? v : (v * 255 + maxval / 2) / maxval);
  };
  if (bitmap) {
    // 1 is black.
    if (plain) {
      for (int64_t i = 0; i < samples; ++i) {
        NEE_ASSIGN_OR_RETURN(int bit, reader.Bit());
        image.pixels[static_cast<size_t>(i)] = bit ? 0 : 255;
      }
    } else {
      const uint64_t row_bytes = (static_cast<uint64_t>(width) + 7) / 8;
      if (row_bytes * static_cast<uint64_t>(height) > reader.remaining()) return Undecodable("PNM", "the pixel data is truncated");
      for (int64_t y = 0; y < height; ++y)
        for (int64_t x = 0; x < width; ++x) {
          const uint8_t byte = reader.here()[y * row_bytes + x / 8];
          image.pixels[static_cast<size_t>(y * width + x)] = ((byte >> (7 - x % 8)) & 1) ? 0 : 255;
        }
    }
    return image;
  }
  if (plain) {
    for (int64_t i = 0; i < samples; ++i) {
      NEE_ASSIGN_OR_RETURN(int64_t v, reader.Number(65535, "sample"));
      image.pixels[static_cast<size_t>(i)] = scale(v);
    }
    return image;
  }
  const uint64_t sample_bytes = maxval > 255 ? 2 : 1;
  if (static_cast<uint64_t>(samples) * sample_bytes > reader.remaining()) return Undecodable("PNM", "the pixel data is truncated");
  const uint8_t* p = reader.here();
  for (int64_t i = 0; i < samples; ++i) {
    const int64_t v = sample_bytes == 2 ? (int64_t{p[2 * i]} << 8) | p[2 * i + 1] : p[i];
    image.pixels[static_cast<size_t>(i)] = scale(v);
  }
  return image;
}

// ---- Format detection and the operator -----------------------------------------------

bool StartsWith(const uint8_t* data, size_t size, std::string_view magic) {
  return size >= magic.size() && std::memcmp(data, magic.data(), magic.size()) == 0;
}

Result<DecodedImage> DecodeAny(const uint8_t* data, size_t size) {
  using namespace std::string_view_literals;
  if (StartsWith(data, size, "\xFF\xD8\xFF"sv)) return DecodeJpeg(data, size);
  if (StartsWith(data, size, "\x89PNG\r\n\x1A\n"sv)) return DecodePng(data, size);
  if (StartsWith(data, size, "BM"sv)) return DecodeBmp(data, size);
  if (StartsWith(data, size, "II*\0"sv) || StartsWith(data, size, "MM\0*"sv) || StartsWith(data, size, "II+\0"sv) ||
      StartsWith(data, size, "MM\0+"sv))
    return DecodeTiff(data, size);
  if (size >= 12 && StartsWith(data, size, "RIFF"sv) && std::memcmp(data + 8, "WEBP", 4) == 0) return DecodeWebp(data, size);
  if (StartsWith(data, size, "\0\0\0\x0CjP  \r\n\x87\n"sv)) return DecodeJpeg2000(data, size, /*jp2_container=*/true);
  if (StartsWith(data, size, "\xFF\x4F\xFF\x51"sv)) return DecodeJpeg2000(data, size, /*jp2_container=*/false);
  if (size >= 2 && data[0] == 'P' && data[1] >= '1' && data[1] <= '6') return DecodePnm(data, size);
  if (size >= 2 && data[0] == 'P' && data[1] == '7') return NotImplemented("PAM (P7) images are not supported by ImageDecoder");
  return Undecodable("image", "the format is not recognized (expected JPEG, PNG, BMP, TIFF, WebP, JPEG 2000 or PNM)");
}

enum class PixelFormat { kRgb, kBgr, kGray };

Result<PixelFormat> ReadPixelFormat(const Node& node) {
  Result<std::string> read = node.GetString("pixel_format", "RGB");
  if (!read.ok()) return read.status();
  const std::string& format = read.value();
  if (format == "RGB") return PixelFormat::kRgb;
  if (format == "BGR") return PixelFormat::kBgr;
  if (format == "Grayscale") return PixelFormat::kGray;
  return InvalidModel(node.Describe() + ": pixel_format must be 'RGB', 'BGR' or 'Grayscale', got '" + format + "'");
}

int ChannelsOf(PixelFormat format) { return format == PixelFormat::kGray ? 1 : 3; }

Status InferImageDecoder(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(PixelFormat format, ReadPixelFormat(ctx.node));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* in, InputTensorType(ctx, 0));
  if (in->elem_type != DataType::kUndefined && in->elem_type != DataType::kUint8)
    return ctx.InputError(0, std::string("encoded_stream must be uint8, got ") + DataTypeName(in->elem_type));
  if (in->shape && in->shape->size() != 1)
    return ctx.InputError(0, "encoded_stream must be 1-D, got " + ShapeToString(*in->shape));
  ctx.output_types[0] =
      TypeInfo::Tensor(DataType::kUint8, Shape{Dim::Unknown(), Dim::Unknown(), Dim::Known(ChannelsOf(format))});
  return Status::Ok();
}

// Writes `image` (gray or RGB) into `out` in the requested format.
void ConvertPixels(const DecodedImage& image, PixelFormat format, uint8_t* out) {
  const int64_t n = image.width * image.height;
  const uint8_t* in = image.pixels.data();
  for (int64_t i = 0; i < n; ++i) {
    uint8_t r, g, b;
    if (image.channels == 1) {
      r = g = b = in[i];
    } else {
      r = in[i * 3], g = in[i * 3 + 1], b = in[i * 3 + 2];
    }
    switch (format) {
      case PixelFormat::kRgb: out[i * 3] = r, out[i * 3 + 1] = g, out[i * 3 + 2] = b; break;
      case PixelFormat::kBgr: out[i * 3] = b, out[i * 3 + 1] = g, out[i * 3 + 2] = r; break;
      case PixelFormat::kGray: out[i] = image.channels == 1 ? in[i] : PillowLuma(r, g, b); break;
    }
  }
}

Status ImageDecoderKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(PixelFormat format, ReadPixelFormat(ctx.node()));
  NEE_ASSIGN_OR_RETURN(const Tensor* in, ctx.InputTensor(0));
  if (in->dtype() != DataType::kUint8)
    return ctx.InputError(0, std::string("encoded_stream must be uint8, got ") + DataTypeName(in->dtype()));
  if (in->rank() != 1) return ctx.InputError(0, "encoded_stream must be 1-D, got " + in->Describe());
  const int64_t channels = ChannelsOf(format);
  Result<DecodedImage> decoded = DecodeAny(in->data<uint8_t>(), static_cast<size_t>(in->num_elements()));
  if (!decoded.ok()) {
    // The spec: a stream that cannot be decoded gives an empty image.
    if (decoded.status().code() == StatusCode::kInvalidArgument) {
      NEE_RETURN_IF_ERROR(ctx.AllocateOutput(0, DataType::kUint8, {0, 0, channels}).status());
      return Status::Ok();
    }
    return decoded.status().WithContext(ctx.node().Describe() + ": ");
  }
  const DecodedImage& image = decoded.value();
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, DataType::kUint8, {image.height, image.width, channels}));
  ConvertPixels(image, format, out.data<uint8_t>());
  return Status::Ok();
}

}  // namespace

void RegisterImageOps(OpRegistry& registry) {
  registry.RegisterVersions("", "ImageDecoder", {20}, InferImageDecoder, ImageDecoderKernel);
}

}  // namespace nee
