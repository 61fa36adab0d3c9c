// What the CPU provider's kernel tests share: random inputs and running one
// optimized kernel directly with a pool of a given size.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../ops/op_test_util.h"
#include "ep/cpu/sgemm.h"

namespace nee::testing {

// n floats uniform in [-1, 1).
inline std::vector<float> RandomFloats(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

inline int64_t ElementCount(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Uniform 8-bit values of `type` (uint8 or int8) over the whole range.
inline Tensor Random8(DataType type, const std::vector<int64_t>& dims, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(0, 255);
  const int64_t n = ElementCount(dims);
  if (type == DataType::kUint8) {
    std::vector<uint8_t> v(static_cast<size_t>(n));
    for (auto& e : v) e = static_cast<uint8_t>(dist(rng));
    return Tensor::FromVector(v, dims);
  }
  std::vector<int8_t> v(static_cast<size_t>(n));
  for (auto& e : v) e = static_cast<int8_t>(dist(rng) - 128);
  return Tensor::FromVector(v, dims);
}

inline Tensor RandomTensor(const std::vector<int64_t>& dims, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return Tensor::FromVector(RandomFloats(n, rng), dims);
}

// Runs `kernel` on `inputs` with a pool of `threads` threads as a session does: with the node's prepared-state
// `cache` and which inputs are session constants (both may be null: a kernel run on its own); its first output.
inline Result<Tensor> RunKernelPrepared(KernelFn kernel, const Node& node, int64_t opset,
                                        const std::vector<Value>& inputs, int threads, PreparedCache* cache,
                                        const std::vector<bool>* constant) {
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(&v);
  std::vector<Value> outputs(node.outputs.size());
  ThreadPool pool(threads);
  KernelContext ctx(node, opset, ptrs, &outputs, nullptr, &pool, nullptr);
  ctx.SetPrepared(cache, constant);
  NEE_RETURN_IF_ERROR(kernel(ctx));
  return outputs[0].tensor();
}

// Runs `kernel` on `inputs` with a pool of `threads` threads; its first output.
inline Result<Tensor> RunKernel(KernelFn kernel, const Node& node, int64_t opset, const std::vector<Value>& inputs,
                                int threads) {
  return RunKernelPrepared(kernel, node, opset, inputs, threads, nullptr, nullptr);
}

// Every output of `kernel` with a pool of `threads` threads, the Values that hold no tensor passed as absent
// inputs (omitted optional inputs), at the opset given.
inline Result<std::vector<Value>> RunKernelOmittingAll(KernelFn kernel, const Node& node, int64_t opset,
                                                       const std::vector<Value>& inputs, int threads) {
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(v.is_tensor() ? &v : nullptr);
  std::vector<Value> outputs(node.outputs.size());
  ThreadPool pool(threads);
  KernelContext ctx(node, opset, ptrs, &outputs, nullptr, &pool, nullptr);
  NEE_RETURN_IF_ERROR(kernel(ctx));
  return outputs;
}

// Its first output.
inline Result<Tensor> RunKernelOmitting(KernelFn kernel, const Node& node, int64_t opset,
                                        const std::vector<Value>& inputs, int threads) {
  NEE_ASSIGN_OR_RETURN(std::vector<Value> outputs, RunKernelOmittingAll(kernel, node, opset, inputs, threads));
  return outputs[0].tensor();
}

// A float tensor of `dims` uniform in [lo, hi) (scales).
inline Tensor UniformFloats(const std::vector<int64_t>& dims, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(ElementCount(dims)));
  for (auto& e : v) e = dist(rng);
  return Tensor::FromVector(v, dims);
}

inline void ExpectBitwise(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.dims(), want.dims()) << what;
  ASSERT_EQ(0, std::memcmp(got.raw_data(), want.raw_data(), got.byte_size())) << what;
}

// A test run once per GEMM kernel the machine has: the ISA limit lowered for the test and raised after.
class IsaLimitedTest : public ::testing::TestWithParam<cpu::SgemmIsa> {
 protected:
  void SetUp() override { cpu::SgemmLimitIsa(GetParam()); }
  void TearDown() override { cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512); }
};

// The limits an IsaLimitedTest runs under: every GEMM kernel (dispatched, AVX2, portable).
inline auto AllGemmIsas() {
  return ::testing::Values(cpu::SgemmIsa::kAvx512, cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kPortable);
}

// Names the instances of an IsaLimitedTest: avx512, avx2, portable.
inline std::string IsaName(const ::testing::TestParamInfo<cpu::SgemmIsa>& info) {
  return info.param == cpu::SgemmIsa::kAvx512 ? "avx512" : info.param == cpu::SgemmIsa::kAvx2 ? "avx2" : "portable";
}

// Calls fn(ctx) with a KernelContext of a bare node whose pool has `threads`
// threads: for a kernel's internal entry points (the integer GEMMs) that read
// only the pool from their context.
template <class Fn>
void WithPoolContext(int threads, Fn&& fn) {
  ThreadPool pool(threads);
  std::vector<const Value*> none;
  std::vector<Value> outs;
  Node node = MakeNode("Identity", 0, 0);
  KernelContext ctx(node, 1, none, &outs, nullptr, &pool, nullptr);
  fn(ctx);
}

}  // namespace nee::testing
