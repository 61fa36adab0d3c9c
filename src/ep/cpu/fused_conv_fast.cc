// com.microsoft FusedConv on float32: the fast Conv kernel (conv_fast.cc),
// then the activation applied in place over its output, one pass over memory
// that the Conv just wrote (so mostly still in cache for small layers).
//
// The piecewise-linear activations (Relu, Clip, LeakyRelu, HardSigmoid,
// HardSwish) are vectorized here with AVX2 where the CPU has it. Sigmoid, Tanh
// and Silu (x * sigmoid(x)) reuse the fast Sigmoid and Tanh kernels
// (activation_fast.cc) on L1-sized blocks of the output: each block is mapped
// into a stack buffer, then copied back (or multiplied in, for Silu), so those
// kernels never see aliased input and output. Each element is computed the
// same way whichever thread gets it, so results do not depend on the thread
// count. The optional Z input (the residual of Conv + Add) is added before the
// activation, in the same pass. Other types and invalid attributes go to
// FusedConv's reference kernel.
//
// Next step when it pays: apply the activation per tile inside the Conv, while
// the tile is in L1.
#include <cmath>
#include <algorithm>
#include <atomic>
#include <cstring>

#include "ep/cpu/cpu_kernels.h"
#include "ops/fused_conv.h"

#if defined(__x86_64__) || defined(__i386__)
#include "ep/cpu/simd_x86.h"
#define NEE_FUSED_CONV_X86 1
#endif

namespace nee::cpu {

namespace {

using Kind = FusedActivation::Kind;

void ActivatePortable(const FusedActivation& act, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ApplyFusedActivation<float>(act, y[i]);
}

#ifdef NEE_FUSED_CONV_X86
// max_ps(a, b) returns b when either is NaN, so every bound goes first: NaN
// inputs stay NaN, as in the reference.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 Activate8(const FusedActivation& act, __m256 x) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
  switch (act.kind) {
    case Kind::kRelu: return _mm256_max_ps(zero, x);
    case Kind::kClip: return _mm256_min_ps(_mm256_set1_ps(act.b), _mm256_max_ps(_mm256_set1_ps(act.a), x));
    case Kind::kLeakyRelu:
      return _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(act.a)), _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
    case Kind::kHardSigmoid: {
      const __m256 v = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(act.a)), _mm256_set1_ps(act.b));
      return _mm256_min_ps(one, _mm256_max_ps(zero, v));
    }
    case Kind::kHardSwish: {
      const __m256 v = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.f / 6.f)), _mm256_set1_ps(0.5f));
      return _mm256_mul_ps(x, _mm256_min_ps(one, _mm256_max_ps(zero, v)));
    }
    default: return x;  // not reached: the caller sends only the kinds above
  }
}

__attribute__((target("avx2,fma"))) void ActivateAvx2(const FusedActivation& act, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, Activate8(act, _mm256_loadu_ps(y + i)));
  if (i == n) return;
  // The tail through a padded buffer, so that it is computed exactly as a full vector.
  alignas(32) float tail[8] = {};
  for (int64_t k = i; k < n; ++k) tail[k - i] = y[k];
  _mm256_store_ps(tail, Activate8(act, _mm256_load_ps(tail)));
  for (int64_t k = i; k < n; ++k) y[k] = tail[k - i];
}
#endif

// ---- Sigmoid, Tanh, Silu through the fast elementwise kernels ----

constexpr int64_t kBlock = 4096;  // floats per block: input and buffer stay in L1

// Hands out a preallocated tensor as the kernel's output.
class FixedOutput : public KernelContext::OutputAllocator {
 public:
  explicit FixedOutput(Tensor out) : out_(std::move(out)) {}
  Result<Tensor> Allocate(size_t, DataType type, std::vector<int64_t> dims) override {
    if (type != out_.dtype() || dims != out_.dims()) return RuntimeError("FusedConv: unexpected activation output shape");
    return out_;
  }

 private:
  Tensor out_;
};

// A one-input, one-output ai.onnx node `op`, for running its kernel.
Node UnaryNode(const char* op) {
  Node node;
  node.name = std::string("fused_conv_") + op;
  node.op_type = op;
  node.inputs = {"x"};
  node.outputs = {"y"};
  return node;
}

// y[0, n) = kernel(y[0, n)) (Silu: y * sigmoid(y)), block by block.
Status MapThroughKernel(Kind kind, float* y, int64_t n) {
  static const Node kSigmoid = UnaryNode("Sigmoid"), kTanh = UnaryNode("Tanh");
  const Node& node = kind == Kind::kTanh ? kTanh : kSigmoid;
  const KernelFn kernel = kind == Kind::kTanh ? TanhFloat : SigmoidFloat;
  alignas(32) float buffer[kBlock];
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t count = std::min(kBlock, n - begin);
    Value in(Tensor::View(DataType::kFloat, {count}, y + begin, nullptr));
    FixedOutput out(Tensor::View(DataType::kFloat, {count}, buffer, nullptr));
    std::vector<Value> outputs(1);
    KernelContext ctx(node, 13, {&in}, &outputs, &out, nullptr, nullptr);
    NEE_RETURN_IF_ERROR(kernel(ctx));
    if (kind == Kind::kSilu) {
      for (int64_t i = 0; i < count; ++i) y[begin + i] *= buffer[i];
    } else {
      std::memcpy(y + begin, buffer, static_cast<size_t>(count) * sizeof(float));
    }
  }
  return Status::Ok();
}

bool PiecewiseLinear(Kind kind) {
  return kind == Kind::kRelu || kind == Kind::kClip || kind == Kind::kLeakyRelu || kind == Kind::kHardSigmoid ||
         kind == Kind::kHardSwish;
}

void Activate(const FusedActivation& act, float* y, int64_t n) {
#ifdef NEE_FUSED_CONV_X86
  if (PiecewiseLinear(act.kind) && CpuHasAvx2Fma()) return ActivateAvx2(act, y, n);
#endif
  ActivatePortable(act, y, n);
}

}  // namespace

Status FusedConvFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  auto act = ReadFusedActivation(ctx.node());
  const bool z_usable = !ctx.has_input(3) || (ctx.input(3)->is_tensor() && ctx.input(3)->tensor().dtype() == DataType::kFloat);
  if (x->dtype() != DataType::kFloat || !act.ok() || !z_usable) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor y, RunKeepingOutput(ctx, ConvFloat));
  const float* z = nullptr;
  if (ctx.has_input(3)) {
    const Tensor& zt = ctx.input(3)->tensor();
    if (zt.dims() != y.dims())
      return ctx.InputError(3, "(Z) must have the output's shape " + DimsToString(y.dims()) + ", got " + zt.Describe());
    z = zt.data<float>();
  }
  const FusedActivation activation = act.value();
  if (activation.kind == Kind::kNone && !z) return Status::Ok();
  float* data = y.data<float>();
  const bool transcendental =
      activation.kind == Kind::kSigmoid || activation.kind == Kind::kTanh || activation.kind == Kind::kSilu;
  std::atomic<bool> failed{false};
  ctx.ParallelFor(y.num_elements(), 1 << 14, [&](int64_t begin, int64_t end) {
    if (z)
      for (int64_t i = begin; i < end; ++i) data[i] += z[i];
    if (activation.kind == Kind::kNone) return;
    if (!transcendental) return Activate(activation, data + begin, end - begin);
    if (!MapThroughKernel(activation.kind, data + begin, end - begin).ok()) failed = true;
  });
  if (failed) return ctx.Error("the fused activation failed");
  return Status::Ok();
}

}  // namespace nee::cpu
