// The uint8 / int8 MaxPool (ep/cpu/pool_int8_fast.cc) against the reference pool kernel (ops/pool.cc):
// every output bitwise equal, on the AVX-512 VBMI, AVX2 and portable paths, at one, two and three threads.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"

namespace nee {
namespace {

using testing::IntAttr;
using testing::IntsAttr;
using testing::StringAttr;

struct Pool8Case {
  std::string name;
  std::vector<int64_t> x_dims;
  std::vector<Attribute> attrs;
};

std::vector<Pool8Case> Cases() {
  return {
      // ResNet-50's: 3x3 stride 2, pads 1 (here on an image 70 wide: two 32-output vectors and a tail).
      {"resnet_3x3_s2_pad1", {1, 3, 20, 140}, {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      // ResNet-50's own plane (112 wide: two input registers, 56 outputs), a 128-wide one (the widest the
      // AVX-512 rows take), 65 outputs (one more than they take), 64-wide input.
      {"resnet_112", {1, 3, 112, 112}, {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"width_128_s2", {2, 2, 5, 128}, {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"outputs_65", {1, 2, 4, 65}, {IntsAttr("kernel_shape", {1, 1})}},
      {"width_64_s1", {1, 2, 6, 64}, {IntsAttr("kernel_shape", {3, 2}), IntsAttr("pads", {1, 0, 1, 1})}},
      {"2x2_s2", {2, 3, 8, 9}, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2})}},
      {"3x3_s1_pad1_wide", {1, 2, 7, 75}, {IntsAttr("kernel_shape", {3, 3}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"asym_pads", {1, 2, 9, 40}, {IntsAttr("kernel_shape", {3, 2}), IntsAttr("pads", {2, 0, 0, 1})}},
      {"ceil_mode", {1, 3, 10, 71}, {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}), IntAttr("ceil_mode", 1)}},
      {"ceil_mode_padded", {1, 2, 9, 9},
       {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1}), IntAttr("ceil_mode", 1)}},
      {"dilated_s2", {1, 2, 12, 90},
       {IntsAttr("kernel_shape", {2, 3}), IntsAttr("strides", {1, 2}), IntsAttr("dilations", {2, 2}), IntsAttr("pads", {1, 2, 1, 2})}},
      {"stride_3", {1, 2, 11, 50}, {IntsAttr("kernel_shape", {3, 4}), IntsAttr("strides", {3, 3}), IntsAttr("pads", {1, 2, 0, 1})}},
      {"same_upper", {1, 2, 7, 8}, {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}), StringAttr("auto_pad", "SAME_UPPER")}},
      {"same_lower_wide", {1, 2, 7, 66}, {IntsAttr("kernel_shape", {2, 3}), StringAttr("auto_pad", "SAME_LOWER")}},
      {"valid", {1, 2, 7, 8}, {IntsAttr("kernel_shape", {3, 2}), StringAttr("auto_pad", "VALID")}},
      // Windows of padding alone: the reference writes 0 there.
      {"pads_as_big_as_the_kernel", {1, 2, 6, 6}, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("pads", {2, 2, 2, 2})}},
      {"kernel_larger_than_input_padded", {1, 1, 2, 2}, {IntsAttr("kernel_shape", {3, 3}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"single_column", {1, 2, 7, 1}, {IntsAttr("kernel_shape", {5, 5}), IntsAttr("pads", {2, 2, 2, 2})}},
      // Rows so wide that the output rows go in several blocks of padded rows (about 16 KiB a block: 5 rows
      // here), with a last block of fewer rows, and windows of padding alone at the top and bottom.
      {"wide_rows_in_blocks", {1, 2, 27, 3001},
       {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}), IntsAttr("pads", {3, 1, 3, 1})}},
      {"wide_rows_stride_1", {1, 1, 13, 2500}, {IntsAttr("kernel_shape", {2, 4}), IntsAttr("pads", {0, 2, 1, 1})}},
      // Windows of 3 to 5 rows over rows of at least 32 bytes (the vertical max beyond its unrolled 2 and 3 rows),
      // and a stride-2 window of 5 columns (beyond the unrolled 3).
      {"5x5_wide", {1, 2, 9, 45}, {IntsAttr("kernel_shape", {5, 5}), IntsAttr("pads", {2, 2, 2, 2})}},
      {"1x5_s2_wide", {1, 2, 4, 90}, {IntsAttr("kernel_shape", {1, 5}), IntsAttr("strides", {1, 2}), IntsAttr("pads", {0, 2, 0, 2})}},
      // Not 2-D: the reference's.
      {"1d", {2, 3, 17}, {IntsAttr("kernel_shape", {3}), IntsAttr("strides", {2}), IntsAttr("pads", {1, 1})}},
  };
}

TEST(PoolInt8Fast, MaxPoolMatchesReference) {
  std::mt19937 rng(11);
  for (const Pool8Case& c : Cases())
    for (DataType t : {DataType::kUint8, DataType::kInt8}) {
      Node node = testing::MakeNode("MaxPool", 1, 1, c.attrs);
      Value x(testing::Random8(t, c.x_dims, rng));
      auto ref = testing::RunOp(node, 12, {x});
      ASSERT_TRUE(ref.ok()) << c.name << ": " << ref.status().ToString();
      const Tensor& want = ref->outputs[0].tensor();
      // The AVX-512 VBMI rows (where the CPU has them), AVX2, portable.
      for (int level : {0, 1, 2}) {
        const bool portable = level == 2;
        cpu::SgemmLimitIsa(level == 0 ? cpu::SgemmIsa::kAvx512 : cpu::SgemmIsa::kAvx2);
        cpu::SgemmForcePortable(portable);
        for (int threads : {1, 2, 3}) {
          auto got = testing::RunKernel(cpu::MaxPool8, node, 12, {x}, threads);
          ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().ToString();
          ASSERT_EQ(got->dtype(), want.dtype()) << c.name;
          ASSERT_EQ(got->dims(), want.dims()) << c.name;
          EXPECT_EQ(0, std::memcmp(got->raw_data(), want.raw_data(), want.byte_size()))
              << c.name << " " << DataTypeName(t) << " threads=" << threads << " level=" << level;
        }
      }
      cpu::SgemmForcePortable(false);
      cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
    }
}

// Float tensors go on to the float32 kernel.
TEST(PoolInt8Fast, FloatGoesToFloatKernel) {
  std::mt19937 rng(5);
  Node node = testing::MakeNode("MaxPool", 1, 1, {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2})});
  Value x(testing::RandomTensor({1, 2, 9, 40}, rng));
  auto ref = testing::RunOp(node, 12, {x});
  ASSERT_TRUE(ref.ok());
  auto got = testing::RunKernel(cpu::MaxPool8, node, 12, {x}, 2);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(0, std::memcmp(got->raw_data(), ref->outputs[0].tensor().raw_data(), got->byte_size()));
}

}  // namespace
}  // namespace nee
