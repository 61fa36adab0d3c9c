// The optimized float32 Conv (ep/cpu/conv_fast.cc) against the reference
// Conv kernel over a grid of geometries, for thread-count independence, and
// against a few values computed independently with numpy.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/conv_batched.h"
#include "ep/cpu/conv_common.h"
#include "ep/cpu/conv_winograd43.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"

namespace nee {
namespace {

using testing::IntAttr;
using testing::IntsAttr;
using testing::StringAttr;

std::vector<float> RandomVector(int64_t n, std::mt19937& rng) { return testing::RandomFloats(n, rng); }

int64_t Product(const std::vector<int64_t>& d) {
  int64_t p = 1;
  for (int64_t v : d) p *= v;
  return p;
}

struct ConvCase {
  std::string name;
  std::vector<int64_t> x_dims, w_dims;
  bool bias = true;
  std::vector<Attribute> attrs;
};

// Runs the optimized kernel directly with a pool of `threads` threads.
Result<Tensor> RunFast(const Node& node, const std::vector<Value>& inputs, int threads) {
  return testing::RunKernel(cpu::ConvFloat, node, 22, inputs, threads);
}

std::vector<Value> MakeInputs(const ConvCase& c, std::mt19937& rng) {
  std::vector<Value> inputs = {Value(Tensor::FromVector(RandomVector(Product(c.x_dims), rng), c.x_dims)),
                               Value(Tensor::FromVector(RandomVector(Product(c.w_dims), rng), c.w_dims))};
  if (c.bias) inputs.push_back(Value(Tensor::FromVector(RandomVector(c.w_dims[0], rng), {c.w_dims[0]})));
  return inputs;
}

std::vector<ConvCase> Grid() {
  using V = std::vector<int64_t>;
  return {
      {"2d_3x3_pad1", {2, 3, 9, 11}, {5, 3, 3, 3}, true, {IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_3x3_nopad_nobias", {1, 4, 7, 6}, {8, 4, 3, 3}, false, {}},
      {"2d_stride2_asym_pads", {2, 3, 13, 10}, {7, 3, 3, 3}, true,
       {IntsAttr("strides", {2, 2}), IntsAttr("pads", {0, 1, 2, 0})}},
      {"2d_stride_hw_differ", {1, 2, 15, 17}, {3, 2, 5, 3}, true,
       {IntsAttr("strides", {3, 2}), IntsAttr("pads", {2, 1, 1, 2})}},
      {"2d_dilation", {1, 3, 14, 12}, {4, 3, 3, 3}, true,
       {IntsAttr("dilations", {2, 3}), IntsAttr("pads", {2, 3, 2, 3})}},
      {"2d_dilation_stride", {2, 2, 16, 16}, {3, 2, 3, 2}, false,
       {IntsAttr("dilations", {2, 2}), IntsAttr("strides", {2, 3}), IntsAttr("pads", {1, 0, 0, 1})}},
      {"2d_groups2", {2, 6, 8, 9}, {4, 3, 3, 3}, true, {IntAttr("group", 2), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_groups3_stride", {1, 6, 11, 11}, {9, 2, 3, 3}, true, {IntAttr("group", 3), IntsAttr("strides", {2, 2})}},
      {"2d_depthwise", {2, 8, 10, 13}, {8, 1, 3, 3}, true, {IntAttr("group", 8), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_depthwise_nobias_stride2", {1, 5, 12, 9}, {5, 1, 3, 3}, false,
       {IntAttr("group", 5), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 0, 1, 1})}},
      {"2d_depthwise_multiplier", {1, 3, 7, 8}, {6, 1, 5, 5}, true,
       {IntAttr("group", 3), IntsAttr("pads", {2, 2, 2, 2})}},
      {"2d_depthwise_dilated_wide", {1, 4, 6, 40}, {4, 1, 2, 3}, true,
       {IntAttr("group", 4), IntsAttr("dilations", {2, 4}), IntsAttr("pads", {1, 4, 0, 3})}},
      {"2d_depthwise_kernel_wider_than_input", {1, 2, 5, 3}, {2, 1, 3, 7}, true,
       {IntAttr("group", 2), IntsAttr("pads", {1, 3, 1, 3})}},
      {"2d_depthwise_big", {2, 16, 37, 45}, {16, 1, 3, 3}, true, {IntAttr("group", 16), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_depthwise_big_stride2", {1, 8, 33, 50}, {8, 1, 3, 3}, true,
       {IntAttr("group", 8), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 0, 0})}},
      {"2d_depthwise_stride3_5x5", {1, 3, 17, 19}, {3, 1, 5, 5}, true,
       {IntAttr("group", 3), IntsAttr("strides", {3, 3}), IntsAttr("pads", {2, 1, 2, 0})}},
      {"2d_depthwise_narrow_rows", {2, 6, 9, 7}, {6, 1, 3, 3}, false,
       {IntAttr("group", 6), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_1x1", {3, 16, 5, 7}, {24, 16, 1, 1}, true, {}},
      {"2d_1x1_nobias_groups", {1, 8, 6, 6}, {8, 4, 1, 1}, false, {IntAttr("group", 2)}},
      {"2d_1x1_stride2", {1, 8, 9, 9}, {4, 8, 1, 1}, true, {IntsAttr("strides", {2, 2})}},
      {"2d_1x1_padded", {1, 3, 4, 5}, {2, 3, 1, 1}, true, {IntsAttr("pads", {1, 0, 0, 1})}},
      {"2d_same_upper", {1, 3, 10, 9}, {4, 3, 3, 4}, true,
       {StringAttr("auto_pad", "SAME_UPPER"), IntsAttr("strides", {2, 2})}},
      {"2d_same_lower", {1, 3, 10, 9}, {4, 3, 4, 3}, true,
       {StringAttr("auto_pad", "SAME_LOWER"), IntsAttr("strides", {2, 1})}},
      {"2d_same_upper_dilated_depthwise", {1, 4, 9, 9}, {4, 1, 3, 3}, true,
       {StringAttr("auto_pad", "SAME_UPPER"), IntAttr("group", 4), IntsAttr("dilations", {2, 2})}},
      {"2d_valid", {1, 2, 8, 7}, {3, 2, 3, 2}, true,
       {StringAttr("auto_pad", "VALID"), IntsAttr("pads", {0, 0, 0, 0})}},
      {"2d_kernel_shape_attr", {1, 2, 6, 6}, {3, 2, 3, 3}, true, {IntsAttr("kernel_shape", {3, 3})}},
      {"2d_kernel_wider_than_input", {1, 2, 4, 3}, {3, 2, 3, 7}, true, {IntsAttr("pads", {1, 3, 1, 3})}},
      {"2d_same_rows_tiled", {2, 5, 23, 19}, {6, 5, 3, 5}, false, {IntsAttr("pads", {1, 2, 1, 2})}},
      {"2d_odd_sizes", {3, 5, 1, 23}, {7, 5, 1, 4}, true, {IntsAttr("pads", {0, 2, 0, 1})}},
      {"2d_large_tiled", {1, 64, 40, 40}, {16, 64, 3, 3}, true, {IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_deep_k", {1, 300, 6, 6}, {20, 300, 3, 3}, true, {}},
      {"1d", {2, 3, 20}, {4, 3, 5}, true, {IntsAttr("pads", {2, 1}), IntsAttr("strides", {2})}},
      {"1d_depthwise", {1, 6, 17}, {6, 1, 3}, false, {IntAttr("group", 6), IntsAttr("dilations", {2})}},
      {"1d_pointwise", {2, 5, 9}, {3, 5, 1}, true, {}},
      {"3d", {1, 2, 5, 6, 7}, {3, 2, 3, 3, 2}, true, {IntsAttr("pads", {1, 0, 1, 1, 0, 0})}},
      {"3d_strided_groups", {2, 4, 7, 6, 5}, {4, 2, 2, 3, 3}, true,
       {IntAttr("group", 2), IntsAttr("strides", {2, 1, 2}), IntsAttr("dilations", {1, 2, 1})}},
      {"3d_depthwise", {1, 3, 4, 5, 6}, {3, 1, 3, 3, 3}, true,
       {IntAttr("group", 3), IntsAttr("pads", {1, 1, 1, 1, 1, 1})}},
      {"batch4_groups4", {4, 8, 6, 5}, {8, 2, 3, 3}, true, {IntAttr("group", 4), IntsAttr("pads", {1, 1, 1, 1})}},
      // The batched path (several images of at most 16 output pixels each, one
      // SGEMM over a chunk of images): silero-vad's 1-D k3 convs (4, 2 and 1
      // pixels, stride 2), groups, dilation, an odd pixel count that splits
      // images across SGEMM's panels, small 2-D images, several k-blocks, and
      // enough images (70 x 5 columns) for several chunks at one thread.
      {"batched_1d_k3_pad1", {5, 9, 4}, {6, 9, 3}, true, {IntsAttr("pads", {1, 1})}},
      {"batched_1d_stride2", {3, 8, 4}, {5, 8, 3}, false, {IntsAttr("strides", {2}), IntsAttr("pads", {1, 1})}},
      {"batched_1d_out1", {7, 6, 2}, {4, 6, 3}, true, {IntsAttr("strides", {2}), IntsAttr("pads", {1, 1})}},
      {"batched_1d_groups2", {4, 6, 5}, {4, 3, 3}, true, {IntAttr("group", 2), IntsAttr("pads", {1, 0})}},
      {"batched_1d_groups2_nobias_out2", {6, 4, 4}, {6, 2, 3}, false,
       {IntAttr("group", 2), IntsAttr("strides", {2}), IntsAttr("pads", {1, 1})}},
      {"batched_1d_dilation", {4, 3, 7}, {2, 3, 3}, true, {IntsAttr("dilations", {2}), IntsAttr("pads", {2, 0})}},
      {"batched_1d_feature_extractor", {6, 1, 40}, {13, 1, 8}, true, {IntsAttr("strides", {4})}},
      {"batched_1d_odd_pixels", {7, 5, 13}, {3, 5, 3}, false, {IntsAttr("pads", {0, 1})}},
      {"batched_1d_pointwise", {3, 7, 3}, {5, 7, 1}, true, {}},
      {"batched_2d_3x3", {3, 4, 3, 3}, {5, 4, 3, 3}, true, {IntsAttr("pads", {1, 1, 1, 1})}},
      {"batched_2d_groups2_stride2", {5, 4, 5, 5}, {6, 2, 3, 3}, false,
       {IntAttr("group", 2), IntsAttr("strides", {2, 2})}},
      {"batched_deep_k", {3, 100, 3}, {7, 100, 3}, true, {IntsAttr("pads", {1, 1})}},
      {"batched_many_images", {70, 3, 6}, {13, 3, 3}, true, {IntsAttr("pads", {0, 1})}},
      // Two images, one chunk: with threads, SGEMM itself splits the channels.
      {"batched_two_images_deep", {2, 256, 16}, {128, 256, 3}, true, {IntsAttr("pads", {1, 1})}},
      // Long padded rows read at a large stride: the per-pixel table, not a padded copy.
      {"batched_1d_long_rows", {2, 1, 600000}, {3, 1, 3}, true,
       {IntsAttr("strides", {50000}), IntsAttr("pads", {1, 1})}},
      // The 16-channel blocked depthwise kernel: a partial last block (37 =
      // 2 x 16 + 5), rows wider than one 16-pixel transpose, strips of rows
      // (tall planes), asymmetric pads with stride 2, a 7x7 plane as in
      // MobileNet's last layers, and 1-D.
      {"2d_depthwise_37_channels_7x7", {2, 37, 7, 7}, {37, 1, 3, 3}, true,
       {IntAttr("group", 37), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_depthwise_wide_rows", {1, 18, 6, 70}, {18, 1, 3, 3}, false,
       {IntAttr("group", 18), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_depthwise_tall_strips", {1, 17, 140, 60}, {17, 1, 3, 3}, true,
       {IntAttr("group", 17), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_depthwise_stride2_asymmetric", {2, 20, 15, 14}, {20, 1, 3, 3}, true,
       {IntAttr("group", 20), IntsAttr("strides", {2, 2}), IntsAttr("pads", {0, 1, 2, 0})}},
      {"2d_depthwise_5x5_dilated", {1, 33, 12, 19}, {33, 1, 5, 5}, true,
       {IntAttr("group", 33), IntsAttr("dilations", {2, 1}), IntsAttr("pads", {4, 2, 3, 1})}},
      {"1d_depthwise_blocked", {2, 17, 30}, {17, 1, 5}, true,
       {IntAttr("group", 17), IntsAttr("pads", {2, 2}), IntsAttr("strides", {3})}},
      // The planar depthwise kernel (rows of 12 or more outputs, 3x3 and 5x5,
      // stride 1 or 2): a ragged last vector of columns, heights that leave
      // single rows after the row blocks, pads on one side only, no pads, and
      // stride-2 taps reaching past the right edge.
      {"2d_depthwise_planar_5x5_stride2_asymmetric", {1, 6, 41, 37}, {6, 1, 5, 5}, true,
       {IntAttr("group", 6), IntsAttr("strides", {2, 2}), IntsAttr("pads", {2, 1, 1, 2})}},
      {"2d_depthwise_planar_5x5_valid", {1, 5, 23, 29}, {5, 1, 5, 5}, false, {IntAttr("group", 5)}},
      {"2d_depthwise_planar_stride2_end_pads", {2, 4, 30, 33}, {4, 1, 3, 3}, true,
       {IntAttr("group", 4), IntsAttr("strides", {2, 2}), IntsAttr("pads", {0, 0, 1, 1})}},
      {"2d_depthwise_planar_14_wide", {1, 3, 14, 14}, {3, 1, 3, 3}, true,
       {IntAttr("group", 3), IntsAttr("pads", {1, 1, 1, 1})}},
      // The AVX2 planar kernel through padded scratch rows (3x3 and 5x5,
      // stride 1 or 2): planes narrower than a vector, several small planes
      // to a task with a partial last group, odd widths with stride 2, pads
      // on one side only, and planes tall enough to be cut into strips.
      {"2d_depthwise_scratch_7x7_many", {2, 45, 7, 7}, {45, 1, 3, 3}, true,
       {IntAttr("group", 45), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_depthwise_scratch_stride2_odd", {1, 9, 15, 13}, {9, 1, 3, 3}, true,
       {IntAttr("group", 9), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_depthwise_scratch_5x5_narrow", {1, 7, 5, 5}, {7, 1, 5, 5}, false,
       {IntAttr("group", 7), IntsAttr("pads", {2, 2, 2, 2})}},
      {"2d_depthwise_scratch_5x5_stride2_uneven", {1, 5, 19, 23}, {5, 1, 5, 5}, true,
       {IntAttr("group", 5), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 2, 2, 1})}},
      {"2d_depthwise_scratch_tall_strips", {1, 3, 75, 21}, {3, 1, 3, 3}, true,
       {IntAttr("group", 3), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_depthwise_scratch_3_wide", {1, 4, 9, 3}, {4, 1, 3, 3}, false,
       {IntAttr("group", 4), IntsAttr("pads", {0, 1, 0, 1})}},
      {"2d_depthwise_scratch_14x14_stride2", {1, 20, 14, 14}, {20, 1, 3, 3}, true,
       {IntAttr("group", 20), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      // The indirect path (conv_indirect.cc, up to 48 output channels) and
      // the im2col path beside it: stride 1 and 2, a 6x6 stem with pads 2,
      // asymmetric pads, 1x1 stride 2, batch 2, 1-D.
      {"2d_indirect_stride2_few_channels", {1, 5, 21, 18}, {16, 5, 5, 4}, true,
       {IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 2, 1, 1})}},
      {"2d_indirect_stride2_many_channels", {2, 7, 13, 16}, {70, 7, 3, 3}, true,
       {IntsAttr("strides", {2, 2}), IntsAttr("pads", {0, 1, 2, 1})}},
      {"2d_indirect_stem_6x6", {1, 3, 26, 30}, {16, 3, 6, 6}, true,
       {IntsAttr("strides", {2, 2}), IntsAttr("pads", {2, 2, 2, 2})}},
      {"2d_indirect_5x5_stride1", {1, 6, 11, 19}, {40, 6, 5, 5}, false, {IntsAttr("pads", {2, 1, 2, 3})}},
      {"2d_indirect_1x1_stride2", {1, 9, 12, 11}, {30, 9, 1, 1}, true, {IntsAttr("strides", {2, 2})}},
      {"1d_indirect", {2, 4, 40}, {20, 4, 7}, true, {IntsAttr("pads", {3, 3})}},
      // The pixel-major path (conv_pixel_gemm.cc; AVX2): deep pointwise convs
      // on a small image or with few outputs (output channels not a multiple
      // of 16, depth split into equal blocks), stride-2 outputs one and two
      // pixels wide, a deep stride-2 conv, rows wider than one task (240
      // pixels) at stride 1 and 2, and pads wider than the kernel's reach on
      // both sides (border pixels gathered over several rows).
      {"2d_pixel_pointwise_deep_7x7", {2, 170, 7, 7}, {37, 170, 1, 1}, true, {}},
      {"2d_pixel_pointwise_few_outputs", {1, 200, 20, 20}, {33, 200, 1, 1}, false, {}},
      {"2d_pixel_stride2_narrow", {2, 4, 3, 3}, {17, 4, 3, 3}, true,
       {IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_pixel_stride2_one_wide", {1, 3, 5, 2}, {5, 3, 3, 3}, true,
       {IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_pixel_stride2_deep", {1, 150, 9, 9}, {20, 150, 3, 3}, true,
       {IntsAttr("strides", {2, 2}), IntsAttr("pads", {0, 1, 1, 0})}},
      {"2d_pixel_wide_rows", {1, 3, 4, 600}, {8, 3, 3, 3}, true, {IntsAttr("pads", {1, 1, 1, 1})}},
      // The small-depth pointwise kernel (AVX2): 1081 pixels (a span of 1008
      // and one of 73, whose last tile has one pixel), 7 outputs (a block of
      // 4 and one of 3), two images; 64 channels, 289 pixels, no bias.
      {"2d_pointwise_small_spans", {2, 5, 23, 47}, {7, 5, 1, 1}, true, {}},
      {"2d_pointwise_small_deep_nobias", {1, 64, 17, 17}, {5, 64, 1, 1}, false, {}},
      // The AVX-512 pointwise kernel (conv_pointwise_avx512.cc; tiles of 8
      // output channels x 48 pixels): input depths 1 to 256, output counts
      // that leave a partial block of 8 (5, 255), one of at most 4 (1, 12:
      // the half-height tiles) or none (8, 16), pixel
      // counts under one vector (1, 9, 15), with partial last vectors (77,
      // 100, 169), in several spans of a deep input (2500 pixels of 256
      // channels), in several chunks of 4096 (4900); two images.
      {"2d_pointwise512_c1_m5", {1, 1, 3, 3}, {5, 1, 1, 1}, true, {}},
      {"2d_pointwise512_c3_m8_nobias", {1, 3, 3, 5}, {8, 3, 1, 1}, false, {}},
      {"2d_pointwise512_c129_m1_one_pixel", {1, 129, 1, 1}, {1, 129, 1, 1}, true, {}},
      {"2d_pointwise512_c17_m16_two_images", {2, 17, 10, 10}, {16, 17, 1, 1}, true, {}},
      {"2d_pointwise512_c64_m255", {1, 64, 7, 11}, {255, 64, 1, 1}, true, {}},
      {"2d_pointwise512_c33_m12", {1, 33, 9, 9}, {12, 33, 1, 1}, true, {}},
      {"2d_pointwise512_c129_m255_nobias", {1, 129, 13, 13}, {255, 129, 1, 1}, false, {}},
      {"2d_pointwise512_c256_m5_spans", {1, 256, 50, 50}, {5, 256, 1, 1}, true, {}},
      {"2d_pointwise512_c8_m16_chunks", {1, 8, 70, 70}, {16, 8, 1, 1}, true, {}},
      {"2d_pixel_wide_rows_stride2", {1, 2, 5, 1101}, {9, 2, 3, 5}, false,
       {IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 2, 0, 2})}},
      {"2d_pixel_wide_pads", {2, 3, 12, 12}, {18, 3, 7, 7}, true,
       {IntsAttr("strides", {2, 2}), IntsAttr("pads", {3, 5, 2, 4})}},
      // 1-D strided convs (their row axis trivial, its stride 1) on the
      // pixel-major path: outputs two and one pixel long, padded (silero-vad's
      // encoder), a stride of 128 over a 256-tap window (its STFT), a 2-D
      // stride of 3 with 16 outputs and pads reaching into the borders; and
      // a 1-D stride-2 conv too shallow for it, on the indirect path.
      {"1d_pixel_stride2_two_outputs", {1, 128, 3}, {64, 128, 3}, true,
       {IntsAttr("strides", {2}), IntsAttr("pads", {1, 1})}},
      {"1d_pixel_stride2_one_output", {2, 64, 2}, {40, 64, 3}, true,
       {IntsAttr("strides", {2}), IntsAttr("pads", {1, 1})}},
      {"1d_pixel_stride128", {1, 1, 576}, {258, 1, 256}, false, {IntsAttr("strides", {128})}},
      {"2d_pixel_stride3_padded", {1, 8, 10, 11}, {20, 8, 3, 3}, true,
       {IntsAttr("strides", {3, 3}), IntsAttr("pads", {1, 2, 1, 0})}},
      {"1d_indirect_stride2", {1, 2, 60}, {12, 2, 16}, true, {IntsAttr("strides", {2}), IntsAttr("pads", {7, 7})}},
      // Pointwise convs of one to nine pixels on the pixel-major path (runs
      // of one to three pixels take several channel blocks a tile), and a
      // 1-D stride-2 conv with three outputs.
      {"2d_pixel_pointwise_one_pixel", {1, 300, 1, 1}, {70, 300, 1, 1}, true, {}},
      {"2d_pixel_pointwise_two_pixels", {1, 40, 2, 1}, {50, 40, 1, 1}, false, {}},
      {"2d_pixel_pointwise_nine_pixels", {1, 24, 3, 3}, {33, 24, 1, 1}, true, {}},
      {"1d_pixel_stride2_three_outputs", {1, 64, 5}, {40, 64, 3}, true,
       {IntsAttr("strides", {2}), IntsAttr("pads", {1, 1})}},
      // A 1-D conv laid out as a column (magika's, W = 1) with more output
      // channels than outputs: three pixel tasks (rows of one pixel), at 2
      // threads four channel groups each, so the task count is even.
      {"2d_pixel_column_channel_groups", {1, 16, 500, 1}, {520, 16, 5, 1}, true, {}},
      // Winograd F(2x2, 3x3): odd output sizes (a half-used last tile row and
      // column), asymmetric pads, tile rows wider than one vector of 16
      // tiles, and planes cut into several blocks of tile rows.
      {"2d_winograd_odd", {2, 17, 9, 11}, {19, 17, 3, 3}, true, {IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_winograd_asymmetric_pads", {1, 16, 8, 12}, {16, 16, 3, 3}, false, {IntsAttr("pads", {0, 2, 1, 0})}},
      {"2d_winograd_wide", {1, 16, 5, 70}, {24, 16, 3, 3}, true, {IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_winograd_blocks", {1, 32, 60, 61}, {32, 32, 3, 3}, true, {IntsAttr("pads", {1, 1, 1, 1})}},
      // 1.2 MB of transformed weights: one block with its phases shared among the threads.
      {"2d_winograd_big_weights", {1, 136, 5, 6}, {136, 136, 3, 3}, true, {IntsAttr("pads", {1, 1, 1, 1})}},
      // 1-D convs written as 2-D or 3-D with axes the window does not move
      // along (extent 1, kernel 1, no pads): run as the 1-D conv they are
      // (magika's 5x1 kernel over [C, 512, 1]); a stride on the trivial axis,
      // a depthwise and a grouped one, and a 3-D conv trivial in the middle.
      {"2d_width_one_5x1", {1, 24, 40, 1}, {20, 24, 5, 1}, false, {}},
      {"2d_width_one_strided_padded", {2, 6, 33, 1}, {10, 6, 3, 1}, true,
       {IntsAttr("strides", {2, 3}), IntsAttr("pads", {1, 0, 2, 0}), IntsAttr("dilations", {2, 1})}},
      {"2d_height_one_1x7", {1, 5, 1, 50}, {9, 5, 1, 7}, true, {IntsAttr("pads", {0, 3, 0, 3})}},
      {"2d_width_one_depthwise", {1, 12, 30, 1}, {12, 1, 3, 1}, true,
       {IntAttr("group", 12), IntsAttr("pads", {1, 0, 1, 0})}},
      {"2d_width_one_grouped", {1, 8, 17, 1}, {6, 4, 3, 1}, true, {IntAttr("group", 2)}},
      {"3d_middle_one", {1, 3, 6, 1, 7}, {4, 3, 3, 1, 3}, true, {IntsAttr("pads", {1, 0, 1, 1, 0, 1})}},
  };
}

void ExpectClose(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), DataType::kFloat) << what;
  ASSERT_EQ(got.dims(), want.dims()) << what;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const float w = want.data<float>()[i], g = got.data<float>()[i];
    ASSERT_NEAR(g, w, 2e-5 * (1 + std::abs(w))) << what << " at " << i;
  }
}

// Each kernel set the CPU can run: the widest (dispatched), AVX2 at most
// (the AVX2 kernels on an AVX-512 machine; the same as dispatched on an
// AVX2 one), and the portable loops.
// Winograd is F(2x2, 3x3) here: F(4x4, 3x3)'s larger rounding error is
// held to the output's scale instead, in conv_winograd43_test.
class ConvFastTest : public ::testing::TestWithParam<cpu::SgemmIsa> {
 protected:
  void SetUp() override {
    cpu::SgemmLimitIsa(GetParam());
    cpu::SetWinograd43Mode(cpu::Winograd43Mode::kNever);
  }
  void TearDown() override {
    cpu::SetWinograd43Mode(cpu::Winograd43Mode::kAuto);
    cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
  }
};

TEST_P(ConvFastTest, AgreesWithReferenceKernel) {
  std::mt19937 rng(11);
  for (const ConvCase& c : Grid()) {
    Node node = testing::MakeNode("Conv", c.bias ? 3 : 2, 1, c.attrs);
    std::vector<Value> inputs = MakeInputs(c, rng);
    auto ref = testing::RunOp(node, 22, inputs);
    ASSERT_TRUE(ref.ok()) << c.name << ": " << ref.status().ToString();
    for (int threads : {1, 3}) {
      auto got = RunFast(node, inputs, threads);
      ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().ToString();
      ExpectClose(got.value(), ref->outputs[0].tensor(), c.name + " threads=" + std::to_string(threads));
    }
  }
}

TEST_P(ConvFastTest, BitwiseIndependentOfThreadCount) {
  std::mt19937 rng(12);
  for (const ConvCase& c : Grid()) {
    Node node = testing::MakeNode("Conv", c.bias ? 3 : 2, 1, c.attrs);
    std::vector<Value> inputs = MakeInputs(c, rng);
    auto one = RunFast(node, inputs, 1);
    auto two = RunFast(node, inputs, 2);
    ASSERT_TRUE(one.ok() && two.ok()) << c.name;
    ASSERT_EQ(one->dims(), two->dims()) << c.name;
    EXPECT_EQ(0, std::memcmp(one->data<float>(), two->data<float>(), sizeof(float) * one->num_elements())) << c.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, ConvFastTest,
                         ::testing::Values(cpu::SgemmIsa::kAvx512, cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kPortable),
                         [](const auto& info) {
                           switch (info.param) {
                             case cpu::SgemmIsa::kAvx512: return "dispatched";
                             case cpu::SgemmIsa::kAvx2: return "avx2";
                             case cpu::SgemmIsa::kPortable: break;
                           }
                           return "portable";
                         });

// SgemmWithPackedB with a packer that packs a plain matrix the documented
// way gives bitwise what Sgemm gives for that matrix (odd sizes, several
// k and column blocks, threads).
TEST(SgemmWithPackedB, MatchesSgemmBitwise) {
  std::mt19937 rng(13);
  ThreadPool pool(2);
  for (const auto& mnk : std::vector<std::array<int64_t, 3>>{{7, 5, 3}, {13, 1100, 300}, {70, 33, 600}, {1, 17, 1}}) {
    const int64_t m = mnk[0], n = mnk[1], k = mnk[2];  // not a structured binding: a lambda below reads n (clang 14)
    std::vector<float> a = RandomVector(m * k, rng), b = RandomVector(k * n, rng), c0 = RandomVector(m * n, rng);
    std::vector<float> want = c0, got = c0;
    cpu::Sgemm(m, n, k, 0.5f, {a.data(), k, 1}, {b.data(), n, 1}, 1.f, want.data(), n, &pool);
    // Panels of 32 columns, each two runs of 16 columns of kc rows.
    const int64_t width = cpu::kSgemmPanelWidth, run = cpu::kSgemmPanelRun;
    ASSERT_EQ(width, 2 * run);
    auto pack = [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out) {
      for (int64_t q = 0; q * width < nc; ++q)
        for (int64_t p = 0; p < kc; ++p)
          for (int64_t j = 0; j < width; ++j) {
            const int64_t col = q * width + j;
            out[q * kc * width + (j / run) * kc * run + p * run + j % run] = col < nc ? b[(p0 + p) * n + j0 + col] : 0.f;
          }
    };
    cpu::SgemmWithPackedB(m, n, k, 0.5f, {a.data(), k, 1}, pack, 1.f, got.data(), n, &pool);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), sizeof(float) * want.size())) << m << "x" << n << "x" << k;
  }
}

// In a session (PreparedCache, weights constant) the weights are packed once
// per node and the result is bitwise what packing per call gives, for any
// thread count; weights that are not constant are not cached. (The batched
// path packs only the taps that read the input where others read only
// padding, e.g. batched_1d_out1's first tap: their products were zeros.)
TEST(ConvFast, ConstantWeightsPackedOncePerSession) {
  std::mt19937 rng(14);
  for (const ConvCase& c : Grid()) {
    Node node = testing::MakeNode("Conv", c.bias ? 3 : 2, 1, c.attrs);
    std::vector<Value> inputs = MakeInputs(c, rng);
    auto want = RunFast(node, inputs, 1);
    ASSERT_TRUE(want.ok()) << c.name;
    const std::vector<bool> constant = {false, true, true};
    PreparedCache cache;
    for (int threads : {1, 2, 3}) {
      auto run = testing::RunKernelPrepared(cpu::ConvFloat, node, 22, inputs, threads, &cache, &constant);
      ASSERT_TRUE(run.ok()) << c.name;
      const Tensor& got = *run;
      ASSERT_EQ(got.dims(), want->dims()) << c.name;
      EXPECT_EQ(0, std::memcmp(got.data<float>(), want->data<float>(), sizeof(float) * got.num_elements()))
          << c.name << " threads=" << threads;
    }
    // Depthwise convs take the direct kernel, which packs nothing; the
    // batched path also prepares its geometry once (one more entry).
    const bool depthwise = c.name.find("depthwise") != std::string::npos;
    int64_t out_pixels = 1;
    for (size_t d = 2; d < want->dims().size(); ++d) out_pixels *= want->dims()[d];
    const bool batched = !depthwise && cpu::ConvBatchedApplies(want->dims()[0], out_pixels);
    EXPECT_EQ(cache.size(), depthwise ? 0u : batched ? 2u : 1u) << c.name;
  }
}

// Invalid nodes go to the reference kernel, which reports them.
TEST(ConvFast, InvalidInputsGiveTheReferenceError) {
  Node node = testing::MakeNode("Conv", 2, 1, {IntAttr("group", 2)});
  std::vector<Value> inputs = {Value(Tensor::FromVector(std::vector<float>(3 * 16, 1.f), {1, 3, 4, 4})),
                               Value(Tensor::FromVector(std::vector<float>(4 * 2 * 9, 1.f), {4, 2, 3, 3}))};
  auto got = RunFast(node, inputs, 1);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("group"), std::string::npos) << got.status().ToString();
}

// Expected values from numpy: the input padded with np.pad, then each output
// as np.sum(window * w[m]) (+ b[m]) in float64 over strided, dilated windows
// (script: explicit loops over n, m, oh, ow). Inputs follow fixed patterns:
// x[i] = (i % 7) * 0.25 - 0.75, w[i] = ((i % 5) - 2) * 0.5 (flat indices).
Tensor PatternTensor(const std::vector<int64_t>& dims, bool weights) {
  std::vector<float> v(static_cast<size_t>(Product(dims)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = weights ? static_cast<float>(static_cast<int>(i % 5) - 2) * 0.5f : static_cast<float>(i % 7) * 0.25f - 0.75f;
  return Tensor::FromVector(v, dims);
}

TEST(ConvFast, MatchesNumpyStridedAsymmetricPads) {
  Node node = testing::MakeNode("Conv", 3, 1, {IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 0, 0, 1})});
  std::vector<Value> inputs = {Value(PatternTensor({1, 2, 4, 5}, false)), Value(PatternTensor({3, 2, 3, 3}, true)),
                               Value(Tensor::FromVector(std::vector<float>{0.5f, -1.f, 0.25f}, {3}))};
  auto got = RunFast(node, inputs, 2);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  testing::ExpectTensorNear<float>(got.value(), {1, 3, 2, 2},
                                   {-2.125, -0.125, 0.25, 6.5, -1.125, -0.125, 1.375, -4.5, 0.125, -1.75, -1.625, 1.0});
}

TEST(ConvFast, MatchesNumpyDepthwise) {
  Node node = testing::MakeNode("Conv", 3, 1, {IntAttr("group", 2), IntsAttr("pads", {1, 1, 1, 1})});
  std::vector<Value> inputs = {Value(PatternTensor({1, 2, 4, 4}, false)), Value(PatternTensor({2, 1, 3, 3}, true)),
                               Value(Tensor::FromVector(std::vector<float>{0.5f, -1.f}, {2}))};
  auto got = RunFast(node, inputs, 1);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  testing::ExpectTensorNear<float>(got.value(), {1, 2, 4, 4},
                                   {0.5,    0.125, -0.625, 0.0,  0.5,    1.625,  3.125, 0.375, 0.5,    -1.125, -1.375,
                                    0.75,   0.5,   2.875,  0.875, -0.5,  -1.5,   -1.125, 0.625, -0.125, -1.125, -2.375,
                                    -2.5,   -2.25, -0.75,  2.375, 0.5,   -0.625, -2.0,  -2.0,  -1.75,  -1.25});
}

TEST(ConvFast, MatchesNumpyDilatedGroupedNoBias) {
  Node node = testing::MakeNode("Conv", 2, 1, {IntAttr("group", 2), IntsAttr("dilations", {2, 2})});
  std::vector<Value> inputs = {Value(PatternTensor({1, 4, 5, 5}, false)), Value(PatternTensor({2, 2, 2, 2}, true))};
  auto got = RunFast(node, inputs, 2);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  testing::ExpectTensorNear<float>(got.value(), {1, 2, 3, 3},
                                   {1.0, 2.375, 1.125, -0.875, -1.25, 1.0, -1.0, -1.375, -0.875, -1.75, -0.75, -0.625,
                                    1.5, -1.0, -1.75, 1.25, 1.375, 1.5});
}

}  // namespace
}  // namespace nee

namespace nee {
namespace {

// CopyEvens under each kernel set: every length up to a few vectors, from a
// source exactly 2n - 1 floats long (a sanitizer build catches a read past it).
TEST_P(ConvFastTest, CopyEvensTakesEveryOtherFloatAndReadsNoFurther) {
  for (int64_t n = 1; n <= 50; ++n) {
    std::vector<float> src(static_cast<size_t>(2 * n - 1));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
    std::vector<float> dst(static_cast<size_t>(n), -1.f);
    cpu::CopyEvens(src.data(), dst.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dst[i], static_cast<float>(2 * i)) << "n=" << n << " i=" << i;
  }
}

}  // namespace
}  // namespace nee
