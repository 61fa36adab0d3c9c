// ImageDecoder's decoders that use the system codec libraries: JPEG (libjpeg),
// PNG (libpng), TIFF (libtiff), WebP (libwebp), JPEG 2000 (OpenJPEG), each
// optional at build time. The only file that sees the codecs' headers and
// NEE_HAVE_* switches (CMakeLists.txt), separate from image.cc (the operator,
// BMP and PNM) so that adding or removing a codec rebuilds one file.
//
// The C libraries never get to abort the process: libjpeg and libpng report
// errors through handlers that longjmp back (see RunLibjpeg and RunLibpng for
// the rules that keeps safe in C++), libtiff and OpenJPEG through handlers
// that only record the message.
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

#include "ops/image_decode.h"

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

namespace nee::image_decode {

namespace {

[[maybe_unused]] Status MissingCodec(const char* format, const char* library, const char* package) {
#ifdef NEE_MINIMAL
  return NotImplemented(std::string(format) + " images need " + library +
                        ", and this is a minimal build of nee (NEE_MINIMAL: no image codecs; BMP and PNM only)");
#else
  return NotImplemented(std::string(format) + " images need " + library + ", which this build of nee was built without (install " +
                        package + " and rebuild)");
#endif
}

}  // namespace

// ---- JPEG (libjpeg / libjpeg-turbo) ------------------------------------------------

#ifdef NEE_HAVE_LIBJPEG

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

// ---- TIFF (libtiff) ------------------------------------------------------------------

#ifdef NEE_HAVE_LIBTIFF

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace nee::image_decode
