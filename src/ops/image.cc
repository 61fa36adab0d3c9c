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
// libpng report errors through handlers that longjmp back (see RunLibjpeg and
// RunLibpng for the rules that keeps safe in C++), libtiff and OpenJPEG through
// handlers that only record the message.
#include <algorithm>
#include <array>
#include <climits>
#include <csetjmp>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

#ifdef NEE_HAVE_LIBJPEG
#include <jpeglib.h>
#include <jerror.h>
#endif
#ifdef NEE_HAVE_LIBPNG
#include <png.h>
#endif
#ifdef NEE_HAVE_LIBTIFF
#include <tiffio.h>
#endif
#ifdef NEE_HAVE_LIBWEBP
#include <webp/decode.h>
#endif
#ifdef NEE_HAVE_OPENJPEG
#include <openjpeg.h>
#endif

namespace nee {
namespace {

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
Status Undecodable(const char* format, const std::string& why) {
  return InvalidArgument(std::string(format) + " stream cannot be decoded: " + why);
}

[[maybe_unused]] Status MissingCodec(const char* format, const char* library, const char* package) {
#ifdef NEE_MINIMAL
  return NotImplemented(std::string(format) + " images need " + library +
                        ", and this is a minimal build of nee (NEE_MINIMAL: no image codecs; BMP and PNM only)");
#else
  return NotImplemented(std::string(format) + " images need " + library + ", which this build of nee was built without (install " +
                        package + " and rebuild)");
#endif
}

bool WithinPixelLimit(int64_t width, int64_t height) {
  return width <= kMaxImagePixels && height <= kMaxImagePixels && width * height <= kMaxImagePixels;
}

Status CheckImageSize(const char* format, int64_t width, int64_t height) {
  if (width <= 0 || height <= 0)
    return Undecodable(format, "the header declares an empty image (" + std::to_string(width) + " x " +
                                   std::to_string(height) + ")");
  if (!WithinPixelLimit(width, height))
    return OutOfMemory(std::string(format) + " image declares " + std::to_string(width) + " x " + std::to_string(height) +
                       " pixels, more than the limit of " + std::to_string(kMaxImagePixels) + " pixels");
  return Status::Ok();
}

// Allocates the pixels of a checked size.
DecodedImage MakeImage(int64_t width, int64_t height, int channels) {
  DecodedImage image;
  image.width = width;
  image.height = height;
  image.channels = channels;
  image.pixels.resize(static_cast<size_t>(width * height * channels));
  return image;
}

// Pillow's RGB -> "L": (R * 19595 + G * 38470 + B * 7471 + 0x8000) >> 16.
uint8_t PillowLuma(uint8_t r, uint8_t g, uint8_t b) {
  return static_cast<uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

uint32_t ReadLe16(const uint8_t* p) { return p[0] | (uint32_t{p[1]} << 8); }
uint32_t ReadLe32(const uint8_t* p) { return ReadLe16(p) | (ReadLe16(p + 2) << 16); }

// ---- JPEG (libjpeg / libjpeg-turbo) ------------------------------------------------

#ifdef NEE_HAVE_LIBJPEG

// Pillow's MULDIV255: a * b / 255, rounded, in integers.
int MulDiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

// Progressive JPEGs may hold any number of scans, each a pass over the whole
// image; this many is far beyond what encoders write and bounds the work.
constexpr int kMaxJpegScans = 1000;

struct JpegJob;

struct JpegErrorManager {
  jpeg_error_mgr pub;  // first member: libjpeg hands us a pointer to it
  JpegJob* job;
};

// Everything libjpeg touches lives here, in the caller's frame, so that after
// a longjmp nothing is read from RunLibjpeg's own (indeterminate) locals.
struct JpegJob {
  const uint8_t* data = nullptr;
  size_t size = 0;
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  jpeg_progress_mgr progress;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
  bool too_large = false;
  int64_t width = 0, height = 0;
  int channels = 0;  // 1 gray, 3 RGB, 4 CMYK
  bool adobe_inverted_cmyk = false;
  std::vector<uint8_t> pixels;
};

[[noreturn]] void JpegFail(j_common_ptr cinfo, const char* message) {
  JpegJob* job = reinterpret_cast<JpegErrorManager*>(cinfo->err)->job;
  std::snprintf(job->message, sizeof(job->message), "%s", message);
  std::longjmp(job->jump, 1);
}

void JpegErrorExit(j_common_ptr cinfo) {
  char message[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, message);
  JpegFail(cinfo, message);
}

// Warnings are ignored (as Pillow does), except a premature end of the data:
// libjpeg would pad the image with gray, Pillow refuses a truncated file.
void JpegEmitMessage(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) JpegFail(cinfo, "the data is truncated");
}

void JpegProgressMonitor(j_common_ptr cinfo) {
  if (cinfo->is_decompressor && reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > kMaxJpegScans)
    JpegFail(cinfo, "more than 1000 progressive scans");
}

// Runs libjpeg over job->data. libjpeg reports errors by calling error_exit,
// which must not return; ours longjmps back to the setjmp below. That is safe
// in C++ only because no frame between them (libjpeg's C code, the handlers
// above) and nothing in this function has a destructor to skip: all state is
// in *job, owned by the caller. Returns false on failure (job->message says why).
bool RunLibjpeg(JpegJob* job) {
  std::memset(&job->cinfo, 0, sizeof(job->cinfo));
  job->cinfo.err = jpeg_std_error(&job->err.pub);
  job->err.pub.error_exit = JpegErrorExit;
  job->err.pub.emit_message = JpegEmitMessage;
  job->err.job = job;
  if (setjmp(job->jump)) {
    jpeg_destroy_decompress(&job->cinfo);
    return false;
  }
  jpeg_create_decompress(&job->cinfo);
  job->progress.progress_monitor = JpegProgressMonitor;
  job->cinfo.progress = &job->progress;
  jpeg_mem_src(&job->cinfo, job->data, static_cast<unsigned long>(job->size));
  jpeg_read_header(&job->cinfo, TRUE);
  job->width = job->cinfo.image_width;
  job->height = job->cinfo.image_height;
  if (!WithinPixelLimit(job->width, job->height)) {
    job->too_large = true;
    jpeg_destroy_decompress(&job->cinfo);
    return false;
  }
  switch (job->cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE: job->cinfo.out_color_space = JCS_GRAYSCALE; job->channels = 1; break;
    case JCS_CMYK:
    case JCS_YCCK: job->cinfo.out_color_space = JCS_CMYK; job->channels = 4; break;
    default: job->cinfo.out_color_space = JCS_RGB; job->channels = 3; break;
  }
  // libjpeg's defaults, spelled out because the spec and the reference depend on them.
  job->cinfo.dct_method = JDCT_ISLOW;
  job->cinfo.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&job->cinfo);
  const size_t row_bytes = static_cast<size_t>(job->cinfo.output_width) * static_cast<size_t>(job->channels);
  if (job->cinfo.output_width != job->width || job->cinfo.output_height != job->height ||
      job->cinfo.output_components != job->channels)
    JpegFail(reinterpret_cast<j_common_ptr>(&job->cinfo), "unexpected output geometry");
  job->pixels.resize(row_bytes * static_cast<size_t>(job->height));
  while (job->cinfo.output_scanline < job->cinfo.output_height) {
    JSAMPROW row = job->pixels.data() + row_bytes * job->cinfo.output_scanline;
    jpeg_read_scanlines(&job->cinfo, &row, 1);
  }
  job->adobe_inverted_cmyk = job->cinfo.saw_Adobe_marker;
  jpeg_finish_decompress(&job->cinfo);
  jpeg_destroy_decompress(&job->cinfo);
  return true;
}

Result<DecodedImage> DecodeJpeg(const uint8_t* data, size_t size) {
  JpegJob job;
  job.data = data;
  job.size = size;
  if (!RunLibjpeg(&job)) {
    if (job.too_large) return CheckImageSize("JPEG", job.width, job.height);
    return Undecodable("JPEG", job.message);
  }
  if (job.channels != 4) {
    DecodedImage image;
    image.width = job.width;
    image.height = job.height;
    image.channels = job.channels;
    image.pixels = std::move(job.pixels);
    return image;
  }
  // CMYK (Adobe files store it inverted) to RGB as Pillow converts it.
  DecodedImage image = MakeImage(job.width, job.height, 3);
  const int64_t n = job.width * job.height;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* in = job.pixels.data() + i * 4;
    int cmyk[4];
    for (int c = 0; c < 4; ++c) cmyk[c] = job.adobe_inverted_cmyk ? 255 - in[c] : in[c];
    const int not_k = 255 - cmyk[3];
    for (int c = 0; c < 3; ++c)
      image.pixels[static_cast<size_t>(i * 3 + c)] = static_cast<uint8_t>(std::clamp(not_k - MulDiv255(cmyk[c], not_k), 0, 255));
  }
  return image;
}

#else
Result<DecodedImage> DecodeJpeg(const uint8_t*, size_t) { return MissingCodec("JPEG", "libjpeg", "libjpeg-dev"); }
#endif  // NEE_HAVE_LIBJPEG

// ---- PNG (libpng) --------------------------------------------------------------------

#ifdef NEE_HAVE_LIBPNG

// As JpegJob: all state in the caller's frame (see RunLibpng).
struct PngJob {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t offset = 0;
  png_structp png = nullptr;
  png_infop info = nullptr;
  char message[256] = {};
  bool too_large = false;
  int64_t width = 0, height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
  std::vector<png_bytep> rows;
};

void PngReadData(png_structp png, png_bytep out, size_t count) {
  auto* job = static_cast<PngJob*>(png_get_io_ptr(png));
  if (count > job->size - job->offset) png_error(png, "the data is truncated");
  std::memcpy(out, job->data + job->offset, count);
  job->offset += count;
}

void PngErrorFn(png_structp png, png_const_charp message) {
  auto* job = static_cast<PngJob*>(png_get_error_ptr(png));
  std::snprintf(job->message, sizeof(job->message), "%s", message ? message : "libpng error");
  png_longjmp(png, 1);
}

void PngWarningFn(png_structp, png_const_charp) {}

// libpng reports errors by longjmp to the setjmp below (png_jmpbuf); the same
// rules as RunLibjpeg keep that safe: no destructors between the two, and all
// state in *job. Returns false on failure.
bool RunLibpng(PngJob* job) {
  job->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job, PngErrorFn, PngWarningFn);
  if (!job->png) return false;
  job->info = png_create_info_struct(job->png);
  if (!job->info) {
    png_destroy_read_struct(&job->png, nullptr, nullptr);
    return false;
  }
  if (setjmp(png_jmpbuf(job->png))) {
    png_destroy_read_struct(&job->png, &job->info, nullptr);
    return false;
  }
  png_set_read_fn(job->png, job, PngReadData);
  // Our own pixel limit (below) applies instead of libpng's, so that an
  // oversized image gets the same clear error as in every other format.
  png_set_user_limits(job->png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
  png_read_info(job->png, job->info);
  job->width = png_get_image_width(job->png, job->info);
  job->height = png_get_image_height(job->png, job->info);
  if (!WithinPixelLimit(job->width, job->height)) {
    job->too_large = true;
    png_destroy_read_struct(&job->png, &job->info, nullptr);
    return false;
  }
  const int color_type = png_get_color_type(job->png, job->info);
  const int bit_depth = png_get_bit_depth(job->png, job->info);
  // To 8-bit gray or RGB: palettes expanded, 16-bit samples keep their high
  // byte (as Pillow unpacks them), alpha and transparency dropped.
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(job->png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(job->png);
  if (bit_depth == 16) png_set_strip_16(job->png);
  if (color_type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(job->png);
  png_set_interlace_handling(job->png);
  png_read_update_info(job->png, job->info);
  job->channels = png_get_channels(job->png, job->info);
  const size_t row_bytes = png_get_rowbytes(job->png, job->info);
  if ((job->channels != 1 && job->channels != 3) ||
      row_bytes != static_cast<size_t>(job->width) * static_cast<size_t>(job->channels))
    png_error(job->png, "unexpected row layout after conversion");
  job->pixels.resize(row_bytes * static_cast<size_t>(job->height));
  job->rows.resize(static_cast<size_t>(job->height));
  for (size_t y = 0; y < job->rows.size(); ++y) job->rows[y] = job->pixels.data() + y * row_bytes;
  png_read_image(job->png, job->rows.data());
  png_destroy_read_struct(&job->png, &job->info, nullptr);
  return true;
}

Result<DecodedImage> DecodePng(const uint8_t* data, size_t size) {
  PngJob job;
  job.data = data;
  job.size = size;
  if (!RunLibpng(&job)) {
    if (job.too_large) return CheckImageSize("PNG", job.width, job.height);
    return Undecodable("PNG", job.message[0] ? job.message : "libpng could not start");
  }
  DecodedImage image;
  image.width = job.width;
  image.height = job.height;
  image.channels = job.channels;
  image.pixels = std::move(job.pixels);
  return image;
}

#else
Result<DecodedImage> DecodePng(const uint8_t*, size_t) { return MissingCodec("PNG", "libpng", "libpng-dev"); }
#endif  // NEE_HAVE_LIBPNG

// ---- In-memory source for TIFF and JPEG 2000 ------------------------------------------

#if defined(NEE_HAVE_LIBTIFF) || defined(NEE_HAVE_OPENJPEG)
// The encoded bytes as a file that libtiff and OpenJPEG read through callbacks,
// with the first error message the library reports.
struct MemorySource {
  const uint8_t* data;
  uint64_t size;
  uint64_t pos;
  char message[256];

  // Copies up to `count` bytes from the current position; returns how many.
  uint64_t Read(void* buffer, uint64_t count) {
    if (pos >= size) return 0;
    const uint64_t take = std::min<uint64_t>(count, size - pos);
    std::memcpy(buffer, data + pos, static_cast<size_t>(take));
    pos += take;
    return take;
  }
};
#endif

// ---- TIFF (libtiff) ------------------------------------------------------------------

#ifdef NEE_HAVE_LIBTIFF

tmsize_t TiffRead(thandle_t handle, void* buffer, tmsize_t count) {
  if (count <= 0) return 0;
  return static_cast<tmsize_t>(static_cast<MemorySource*>(handle)->Read(buffer, static_cast<uint64_t>(count)));
}

tmsize_t TiffWrite(thandle_t, void*, tmsize_t) { return 0; }

toff_t TiffSeek(thandle_t handle, toff_t offset, int whence) {
  auto* src = static_cast<MemorySource*>(handle);
  if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) return static_cast<toff_t>(-1);
  const uint64_t base = whence == SEEK_CUR ? src->pos : whence == SEEK_END ? src->size : 0;
  // Offsets are unsigned; a "negative" relative seek arrives wrapped around.
  // A position past the end is allowed: reads there return nothing.
  const uint64_t target = base + offset;
  src->pos = target;
  return target;
}

int TiffClose(thandle_t) { return 0; }
toff_t TiffSize(thandle_t handle) { return static_cast<MemorySource*>(handle)->size; }
int TiffMap(thandle_t, void**, toff_t*) { return 0; }
void TiffUnmap(thandle_t, void*, toff_t) {}

#if TIFFLIB_VERSION >= 20221213
// Keeps the first error message; libtiff's default handler would print it.
int TiffErrorHandler(TIFF*, void* user, const char* module, const char* format, va_list args) {
  auto* src = static_cast<MemorySource*>(user);
  if (src->message[0] == 0) std::vsnprintf(src->message, sizeof(src->message), format, args);
  return 1;
}
int TiffWarningHandler(TIFF*, void*, const char*, const char*, va_list) { return 1; }
#endif

Result<DecodedImage> DecodeTiff(const uint8_t* data, size_t size) {
  MemorySource src{data, size, 0, {}};
  TIFF* tif = nullptr;
#if TIFFLIB_VERSION >= 20221213
  TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
  if (!options) return OutOfMemory("TIFF: cannot allocate libtiff options");
  TIFFOpenOptionsSetErrorHandlerExtR(options, TiffErrorHandler, &src);
  TIFFOpenOptionsSetWarningHandlerExtR(options, TiffWarningHandler, &src);
  // No single libtiff allocation beyond what the largest allowed image needs.
  TIFFOpenOptionsSetMaxSingleMemAlloc(options, static_cast<tmsize_t>(kMaxImagePixels * 8));
  tif = TIFFClientOpenExt("image", "rm", &src, TiffRead, TiffWrite, TiffSeek, TiffClose, TiffSize, TiffMap, TiffUnmap,
                          options);
  TIFFOpenOptionsFree(options);
#else
  tif = TIFFClientOpen("image", "rm", &src, TiffRead, TiffWrite, TiffSeek, TiffClose, TiffSize, TiffMap, TiffUnmap);
#endif
  if (!tif) return Undecodable("TIFF", src.message[0] ? src.message : "libtiff cannot open it");
  struct Closer {
    TIFF* tif;
    ~Closer() { TIFFClose(tif); }
  } closer{tif};
  uint32_t width = 0, height = 0;
  uint16_t photometric = PHOTOMETRIC_RGB, samples = 1;
  if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width) || !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height))
    return Undecodable("TIFF", "no image width or length");
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &samples);
  TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric);
  NEE_RETURN_IF_ERROR(CheckImageSize("TIFF", width, height));
  char reason[1024] = {};
  if (!TIFFRGBAImageOK(tif, reason)) return Undecodable("TIFF", reason);
  // libtiff's RGBA reader handles every photometric, depth and compression it knows.
  std::vector<uint32_t> raster(static_cast<size_t>(width) * height);
  if (!TIFFReadRGBAImageOriented(tif, width, height, raster.data(), ORIENTATION_TOPLEFT, /*stop_on_error=*/1))
    return Undecodable("TIFF", src.message[0] ? src.message : "libtiff cannot read the pixels");
  const bool gray = (photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE) && samples <= 2;
  DecodedImage image = MakeImage(width, height, gray ? 1 : 3);
  for (size_t i = 0; i < raster.size(); ++i) {
    const uint32_t p = raster[i];
    if (gray) {
      image.pixels[i] = static_cast<uint8_t>(TIFFGetR(p));
    } else {
      image.pixels[i * 3] = static_cast<uint8_t>(TIFFGetR(p));
      image.pixels[i * 3 + 1] = static_cast<uint8_t>(TIFFGetG(p));
      image.pixels[i * 3 + 2] = static_cast<uint8_t>(TIFFGetB(p));
    }
  }
  return image;
}

#else
Result<DecodedImage> DecodeTiff(const uint8_t*, size_t) { return MissingCodec("TIFF", "libtiff", "libtiff-dev"); }
#endif  // NEE_HAVE_LIBTIFF

// ---- WebP (libwebp) ------------------------------------------------------------------

#ifdef NEE_HAVE_LIBWEBP
Result<DecodedImage> DecodeWebp(const uint8_t* data, size_t size) {
  WebPBitstreamFeatures features;
  if (WebPGetFeatures(data, size, &features) != VP8_STATUS_OK) return Undecodable("WebP", "bad header");
  if (features.has_animation) return NotImplemented("animated WebP images are not supported by ImageDecoder");
  NEE_RETURN_IF_ERROR(CheckImageSize("WebP", features.width, features.height));
  DecodedImage image = MakeImage(features.width, features.height, 3);
  // Alpha, when present, is dropped (not blended).
  if (!WebPDecodeRGBInto(data, size, image.pixels.data(), image.pixels.size(), features.width * 3))
    return Undecodable("WebP", "libwebp failed to decode the data");
  return image;
}
#else
Result<DecodedImage> DecodeWebp(const uint8_t*, size_t) { return MissingCodec("WebP", "libwebp", "libwebp-dev"); }
#endif  // NEE_HAVE_LIBWEBP

// ---- JPEG 2000 (OpenJPEG) ------------------------------------------------------------

#ifdef NEE_HAVE_OPENJPEG

OPJ_SIZE_T OpjRead(void* buffer, OPJ_SIZE_T count, void* user) {
  auto* src = static_cast<MemorySource*>(user);
  if (src->pos >= src->size) return static_cast<OPJ_SIZE_T>(-1);  // end of stream
  return static_cast<OPJ_SIZE_T>(src->Read(buffer, count));
}

OPJ_OFF_T OpjSkip(OPJ_OFF_T count, void* user) {
  auto* src = static_cast<MemorySource*>(user);
  if (count < 0 ? static_cast<uint64_t>(-count) > src->pos : static_cast<uint64_t>(count) > src->size - src->pos)
    return -1;
  src->pos = count < 0 ? src->pos - static_cast<uint64_t>(-count) : src->pos + static_cast<uint64_t>(count);
  return count;
}

OPJ_BOOL OpjSeek(OPJ_OFF_T offset, void* user) {
  auto* src = static_cast<MemorySource*>(user);
  if (offset < 0 || static_cast<uint64_t>(offset) > src->size) return OPJ_FALSE;
  src->pos = static_cast<uint64_t>(offset);
  return OPJ_TRUE;
}

void OpjError(const char* message, void* user) {
  auto* src = static_cast<MemorySource*>(user);
  if (src->message[0] == 0) std::snprintf(src->message, sizeof(src->message), "%s", message);
}
void OpjQuiet(const char*, void*) {}

// One decoded sample scaled to 8 bits as Pillow does: signed samples shifted
// to unsigned, deeper ones shifted down, shallower ones shifted up.
uint8_t OpjSampleTo8(int32_t v, const opj_image_comp_t& comp) {
  int64_t x = v;
  if (comp.sgnd) x += int64_t{1} << (comp.prec - 1);
  if (comp.prec > 8) x >>= (comp.prec - 8);
  if (comp.prec < 8) x <<= (8 - comp.prec);
  return static_cast<uint8_t>(std::clamp<int64_t>(x, 0, 255));
}

Result<DecodedImage> DecodeJpeg2000(const uint8_t* data, size_t size, bool jp2_container) {
  MemorySource src{data, size, 0, {}};
  struct Resources {
    opj_stream_t* stream = nullptr;
    opj_codec_t* codec = nullptr;
    opj_image_t* image = nullptr;
    ~Resources() {
      if (image) opj_image_destroy(image);
      if (codec) opj_destroy_codec(codec);
      if (stream) opj_stream_destroy(stream);
    }
  } r;
  r.stream = opj_stream_create(OPJ_J2K_STREAM_CHUNK_SIZE, OPJ_TRUE);
  r.codec = opj_create_decompress(jp2_container ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
  if (!r.stream || !r.codec) return OutOfMemory("JPEG 2000: cannot create the OpenJPEG decoder");
  opj_stream_set_read_function(r.stream, OpjRead);
  opj_stream_set_skip_function(r.stream, OpjSkip);
  opj_stream_set_seek_function(r.stream, OpjSeek);
  opj_stream_set_user_data(r.stream, &src, nullptr);
  opj_stream_set_user_data_length(r.stream, size);
  opj_set_error_handler(r.codec, OpjError, &src);
  opj_set_warning_handler(r.codec, OpjQuiet, &src);
  opj_set_info_handler(r.codec, OpjQuiet, &src);
  opj_dparameters_t params;
  opj_set_default_decoder_parameters(&params);
  if (!opj_setup_decoder(r.codec, &params)) return Undecodable("JPEG 2000", "decoder setup failed");
  if (!opj_read_header(r.stream, r.codec, &r.image) || !r.image)
    return Undecodable("JPEG 2000", src.message[0] ? src.message : "bad header");
  const opj_image_t& img = *r.image;
  if (img.x1 <= img.x0 || img.y1 <= img.y0) return Undecodable("JPEG 2000", "empty image area");
  const int64_t width = static_cast<int64_t>(img.x1) - img.x0, height = static_cast<int64_t>(img.y1) - img.y0;
  NEE_RETURN_IF_ERROR(CheckImageSize("JPEG 2000", width, height));
  if (img.numcomps < 1 || img.numcomps > 4 || !img.comps)
    return NotImplemented("JPEG 2000 images with " + std::to_string(img.numcomps) + " components are not supported");
  for (OPJ_UINT32 c = 0; c < img.numcomps; ++c) {
    if (img.comps[c].dx != 1 || img.comps[c].dy != 1)
      return NotImplemented("JPEG 2000 images with subsampled components are not supported");
    if (img.comps[c].prec < 1 || img.comps[c].prec > 31) return Undecodable("JPEG 2000", "bad sample precision");
  }
  if (img.color_space == OPJ_CLRSPC_SYCC || img.color_space == OPJ_CLRSPC_EYCC || img.color_space == OPJ_CLRSPC_CMYK)
    return NotImplemented("JPEG 2000 images in YCC or CMYK color spaces are not supported");
  if (!opj_decode(r.codec, r.stream, r.image) || !opj_end_decompress(r.codec, r.stream))
    return Undecodable("JPEG 2000", src.message[0] ? src.message : "decoding failed");
  // 1 or 2 components: gray (+ alpha); 3 or 4: RGB (+ alpha). Alpha is dropped.
  const int channels = img.numcomps <= 2 ? 1 : 3;
  for (int c = 0; c < channels; ++c) {
    const opj_image_comp_t& comp = img.comps[c];
    if (!comp.data || comp.w != static_cast<OPJ_UINT32>(width) || comp.h != static_cast<OPJ_UINT32>(height))
      return Undecodable("JPEG 2000", "component " + std::to_string(c) + " does not cover the image");
  }
  DecodedImage image = MakeImage(width, height, channels);
  const int64_t n = width * height;
  for (int c = 0; c < channels; ++c) {
    const opj_image_comp_t& comp = img.comps[c];
    for (int64_t i = 0; i < n; ++i) image.pixels[static_cast<size_t>(i * channels + c)] = OpjSampleTo8(comp.data[i], comp);
  }
  return image;
}

#else
Result<DecodedImage> DecodeJpeg2000(const uint8_t*, size_t, bool) {
  return MissingCodec("JPEG 2000", "OpenJPEG (libopenjp2)", "libopenjp2-7-dev");
}
#endif  // NEE_HAVE_OPENJPEG

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
