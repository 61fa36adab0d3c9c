// What the bfloat16 kernel tests share (bf16_gemm_test.cc, bf16_conv_test.cc):
// random bfloat16 tensors, bitwise comparison, the bfloat16 ulp, and running
// a fast kernel on a thread pool as a session does.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ep/cpu/bf16_gemm.h"
#include "ep_test_util.h"
#include "ir/float_formats.h"

namespace nee::bf16_test {

#define SKIP_WITHOUT_AVX512BF16() \
  if (!cpu::CpuHasAvx512Bf16()) GTEST_SKIP() << "this CPU lacks avx512bf16"

// bfloat16 values uniform in [-1, 1) (rounded from float32).
inline Tensor RandomBf16(const std::vector<int64_t>& dims, std::mt19937& rng) {
  const std::vector<float> f = testing::RandomFloats(testing::ElementCount(dims), rng);
  Tensor t = Tensor::Allocate(DataType::kBFloat16, dims).value();
  for (size_t i = 0; i < f.size(); ++i) t.data<uint16_t>()[i] = FloatToBFloat16(f[i]);
  return t;
}

inline float At(const Tensor& t, int64_t i) { return BFloat16ToFloat(t.data<uint16_t>()[i]); }

inline bool BitwiseEqual(const Tensor& x, const Tensor& y) {
  return x.dtype() == y.dtype() && x.dims() == y.dims() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.byte_size()) == 0;
}

// One bfloat16 ulp at |v| (8 significant bits), at least the smallest normal's.
inline double BfUlp(double v) {
  return std::ldexp(1.0, std::max(std::ilogb(std::max(std::abs(v), 1e-30)), -126) - 7);
}

// The fast kernel with a pool of `threads` threads, as a session runs it:
// with a PreparedCache when `cache` is given, the inputs marked `constant`.
inline Result<Tensor> RunFast(KernelFn kernel, const Node& node, const std::vector<Value>& inputs, int threads,
                              PreparedCache* cache = nullptr, std::vector<bool> constant = {}, int64_t opset = 13) {
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(&v);
  std::vector<Value> outputs(1);
  ThreadPool pool(threads);
  KernelContext ctx(node, opset, ptrs, &outputs, nullptr, &pool, nullptr);
  constant.resize(inputs.size(), false);
  if (cache) ctx.SetPrepared(cache, &constant);
  NEE_RETURN_IF_ERROR(kernel(ctx));
  return outputs[0].tensor();
}

}  // namespace nee::bf16_test
