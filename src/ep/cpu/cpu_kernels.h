// Optimized CPU kernels, registered for the same (domain, op, versions) as
// the reference kernels they replace. Each handles the cases it was written
// for (types, ranks) and hands everything else to the reference kernel, so
// registering one never narrows what runs.
#pragma once
#include "ops/op_schema.h"

namespace nee::cpu {

struct OptimizedKernel {
  const char* domain;
  const char* op;
  int min_since_version;  // applies to schema entries with since_version in [min, max]
  int max_since_version;
  KernelFn kernel;
  // The element types it computes itself (others go to the reference), as
  // the compatibility matrix shows them (`nee ops`, docs/operators.md).
  const char* types = nullptr;
};

// The table of optimized kernels (ep/cpu/cpu_kernels.cc).
const std::vector<OptimizedKernel>& OptimizedKernels();
// The optimized kernel registered for a schema entry; null when none is, or
// the entry has no reference kernel to fall back on.
const OptimizedKernel* FindOptimizedKernel(const OpSchema& schema);

// Runs the op's reference kernel (the fallback of every optimized kernel).
Status RunReference(KernelContext& ctx);
// Runs the reference kernel of ai.onnx `op` on the node: a fused op's kernel
// that runs the fast kernel of the op it extends needs that op's fallback, not
// its own (at the node's opset for ai.onnx nodes, the newest otherwise).
Status RunReferenceOf(KernelContext& ctx, const char* op);

Status MatMulFloat(KernelContext& ctx);
Status GemmFloat(KernelContext& ctx);
// MatMul and Gemm on bfloat16 (bf16_matmul_fast.cc), which MatMulFloat and
// GemmFloat hand bfloat16 inputs to: vdpbf16ps on CPUs with AVX512-BF16
// (bf16_gemm.h), the reference kernels elsewhere.
Status MatMulBFloat16(KernelContext& ctx);
Status GemmBFloat16(KernelContext& ctx);
// The table's MatMul and Gemm (f16_matmul_fast.cc): float16 A on the
// float16-weight GEMM (f16_gemm.h; weights packed once and kept float16),
// every other type handed to MatMulFloat / GemmFloat.
Status MatMulFloatOrHalf(KernelContext& ctx);
Status GemmFloatOrHalf(KernelContext& ctx);
// Conv: ConvFloat, or on bfloat16 (conv_bf16.cc) group-1 2-D convs as a
// vdpbf16ps GEMM over weights packed once and depthwise ones in float32
// lanes, on CPUs with AVX512-BF16; the reference kernel for the rest.
Status ConvFloatOrBFloat16(KernelContext& ctx);
// ai.nee FusedConv (com.microsoft FusedConv on bfloat16, each step rounded)
// on the same kernel, bias, Z and Relu/Clip/LeakyRelu in its epilogue.
Status FusedConvBFloat16(KernelContext& ctx);
// Conv on float32 (conv_fast.cc): pointwise and im2col paths over SGEMM, a direct depthwise kernel (depthwise_padded.cc).
Status ConvFloat(KernelContext& ctx);
// ConvTranspose on float32 (conv_transpose_fast.cc): SGEMM + col2im.
Status ConvTransposeFloat(KernelContext& ctx);
// Pools on float32 (pool_fast.cc): MaxPool (without Indices) and AveragePool
// bitwise equal to the reference; GlobalAveragePool with vectorized sums.
Status MaxPoolFloat(KernelContext& ctx);
// uint8 / int8 2-D MaxPool (pool_int8_fast.cc); hands float tensors to MaxPoolFloat.
Status MaxPool8(KernelContext& ctx);
Status AveragePoolFloat(KernelContext& ctx);
Status GlobalAveragePoolFloat(KernelContext& ctx);
// GlobalMaxPool on float32: sixteen running maxima per plane, the reference's chain where NaN or a zero
// maximum makes the order matter; bitwise the reference.
Status GlobalMaxPoolFloat(KernelContext& ctx);
// Exp, Sigmoid, Tanh and last-axis Softmax on float32 (activation_fast.cc): a vectorized exponential.
Status ExpFloat(KernelContext& ctx);
Status SigmoidFloat(KernelContext& ctx);
Status TanhFloat(KernelContext& ctx);
Status SoftmaxFloat(KernelContext& ctx);

// ---- Element-wise, normalization, transpose ----
// Add, Sub, Mul, Div on float32 (elementwise_fast.cc): equal shapes, scalars and row/channel/mask
// broadcasts as vectorized rows; bitwise equal to the reference.
Status AddFloat(KernelContext& ctx);
Status SubFloat(KernelContext& ctx);
Status MulFloat(KernelContext& ctx);
Status DivFloat(KernelContext& ctx);
Status PowFloat(KernelContext& ctx);
// LayerNormalization and com.microsoft SkipLayerNormalization on float32 (normalization_fast.cc):
// statistics in double, within 1e-6 relative of the reference.
Status LayerNormFloat(KernelContext& ctx);
Status SkipLayerNormFloat(KernelContext& ctx);
// Activations and unary math on float32 (unary_fast.cc). Bitwise equal to the reference: Relu,
// LeakyRelu, HardSigmoid, HardSwish, Clip, Neg, Sqrt, Reciprocal. With simd_math.h's erf / tanh
// (error bounds there): Erf, Gelu (both forms), com.microsoft Gelu, BiasGelu, FastGelu.
Status ReluFloat(KernelContext& ctx);
Status LeakyReluFloat(KernelContext& ctx);
Status HardSigmoidFloat(KernelContext& ctx);
Status HardSwishFloat(KernelContext& ctx);
Status ClipFloat(KernelContext& ctx);
Status NegFloat(KernelContext& ctx);
Status SqrtFloat(KernelContext& ctx);
Status ReciprocalFloat(KernelContext& ctx);
Status ErfFloat(KernelContext& ctx);
Status GeluFloat(KernelContext& ctx);
Status MsGeluFloat(KernelContext& ctx);
Status BiasGeluFloat(KernelContext& ctx);
Status FastGeluFloat(KernelContext& ctx);
// Transpose of 4-byte types (transpose_fast.cc): row copies when the innermost dim stays, tiled
// batched 2-D transposes; other permutations to the reference.
Status TransposeFast(KernelContext& ctx);
// Concat, Split and Slice (contiguous innermost runs) on every whole-byte element type (copy_fast.cc):
// byte copies cut into equal pieces over the threads; bitwise the reference.
Status ConcatFast(KernelContext& ctx);
Status SplitFast(KernelContext& ctx);
Status SliceFast(KernelContext& ctx);
// Pad (opset 11+, pads >= 0, no axes) on every whole-byte element type (pad_fast.cc): output rows as
// their source row plus pads, cut over the threads; bitwise the reference.
Status PadFast(KernelContext& ctx);
// ReduceSum / ReduceMean on float32 over one contiguous block of axes (reduce_fast.cc): each output
// summed in double in the reference's order, independent outputs side by side; bitwise the reference.
Status ReduceSumFloat(KernelContext& ctx);
Status ReduceMeanFloat(KernelContext& ctx);
// Cast between float32 and float16 / bfloat16 (cast_fast.cc): F16C and AVX2 shifts; bitwise the reference.
Status CastFast(KernelContext& ctx);
// ---- end element-wise block ----
// ---- Fused ops written by the optimizer (src/opt) ----
// com.microsoft FusedConv on float32 (fused_conv_fast.cc): the fast Conv, then
// the activation over its output.
Status FusedConvFloat(KernelContext& ctx);
// ai.nee ScaledDotProductAttention on float32 (attention_fast.cc): per (batch, head), two
// single-threaded SGEMMs around a vectorized softmax (with AVX2 SGEMM: per block of queries, on
// its own kernel, the same bits); within 1e-5 of the reference.
Status ScaledDotProductAttentionFloat(KernelContext& ctx);
// Tests: run the SGEMM path even where the AVX2 block path would run.
void AttentionForceSgemmPath(bool on);
// ai.nee FusedMatMul on float32 (fused_matmul_fast.cc): bias and GELU applied per SGEMM tile while it is
// in cache; the same simd_math.h erf / tanh as unary_fast.cc.
Status FusedMatMulFloat(KernelContext& ctx);

// ai.nee BlockedConv on float32 (blocked_conv_fast.cc): the channel-blocked
// layout's pointwise and 3x3 depthwise convolutions (AVX2); others run the reference.
Status BlockedConvFloat(KernelContext& ctx);
// ai.nee ToBlocked / FromBlocked on float32 (blocked_conv_fast.cc): 8x8 transposes.
Status ToBlockedFloat(KernelContext& ctx);
Status FromBlockedFloat(KernelContext& ctx);
// ai.nee BlockedMaxPool on float32 (blocked_pool_fast.cc): a vector per pixel's channel block.
Status BlockedMaxPoolFloat(KernelContext& ctx);
// ai.nee BlockedGlobalAveragePool on float32 (blocked_pool_fast.cc): each lane's sum in the reference's order,
// a vector per block, so the reference's bits.
Status BlockedGlobalAveragePoolFloat(KernelContext& ctx);
// ai.nee BlockedExpandDepthwise on float32 (blocked_expand_depthwise_fast.cc): the expanded
// tensor a band of rows at a time in a buffer the cache keeps (AVX-512); else the reference.
Status BlockedExpandDepthwiseFloat(KernelContext& ctx);
// Tests: the size of its bands of expanded rows (bytes; 0: the default).
void BlockedExpandDepthwiseBandBytes(int64_t bytes);

// ---- Resize (resize_fast.cc) ----
// Resize / Upsample on float32 NCHW resizing H and W (nearest, linear, cubic; any coordinate mode), and
// nearest on uint8 / int8 (a quantized detector's upsampling), bitwise equal to the reference through its
// shared sampling rules (ops/resize_geometry.h).
Status ResizeFast(KernelContext& ctx);
// Tests: run the portable loops even where AVX2 is available.
void ResizeForcePortable(bool on);
// ---- end Resize block ----

// ---- Recurrent (rnn_fast.cc) ----
// LSTM, GRU and RNN on float32 (AVX2 / AVX-512): the input projection of all steps as one SGEMM, per
// step a product over panel-packed recurrent weights (up to 4 batch entries per read) and vectorized
// gates; default activations only (others to the reference). Within 1e-5 + 1e-5 * |ref| of the
// reference (double); bitwise independent of the thread count.
Status LstmFloat(KernelContext& ctx);
Status GruFloat(KernelContext& ctx);
Status RnnFloat(KernelContext& ctx);
// ---- end recurrent block ----

// ---- Quantized (quant_fast.cc, on the integer GEMM of igemm.h) ----
// ConvInteger (1-D and 2-D: im2col of the 8-bit input, weights packed once), MatMulInteger (2-D B, packed
// once when constant) and DynamicQuantizeLinear (vectorized range and rounding): bitwise the reference.
Status ConvIntegerFast(KernelContext& ctx);
Status MatMulIntegerFast(KernelContext& ctx);
Status MatMulIntegerToFloatFast(KernelContext& ctx);  // com.microsoft, dequantized in the GEMM's epilogue
// ai.nee ConvIntegerToFloat (quant_conv_fast.cc): ConvIntegerFast, then its bias, scale, residual and
// activation in one pass over the output; the dequantization bitwise the reference's.
Status ConvIntegerToFloatFast(KernelContext& ctx);
// QLinearMatMul (qlinear_matmul_fast.cc): MatMulInteger's product, then the reference's requantization.
Status QLinearMatMulFast(KernelContext& ctx);
Status DequantizeLinearFast(KernelContext& ctx);  // per tensor, 8-bit to float
Status DynamicQuantizeLinearFast(KernelContext& ctx);
// com.microsoft DynamicQuantizeLSTM (qlstm_fast.cc): its gate products on the integer GEMM, weights packed
// once; the float cell as the reference computes it, so bitwise the reference.
Status DynamicQuantizeLstmFast(KernelContext& ctx);
// DynamicQuantizeLinear's pieces, shared with DynamicQuantizeLSTM: widens [lo, hi] to x's range (NaNs
// skipped), and y = clamp(nearbyint(x / scale) + zero_point, 0, 255) with NaN -> zero_point.
void QuantizeRange(const float* x, int64_t n, float& lo, float& hi);
void QuantizeToUint8(const float* x, int64_t n, float scale, float zero_point, uint8_t* y);
// QLinearConv (qconv_fast.cc: u8 x s8 products by vpmaddubsw with exact remainders, weights packed once,
// the reference's double requantization; depthwise per channel) and the com.microsoft QLinearAdd (same shapes)
// and QLinearLeakyRelu (qlinear_pointwise_fast.cc) that the QDQ fusion writes between quantized convs: bitwise the
// reference.
Status QLinearConvFast(KernelContext& ctx);
Status QuantizeLinearFast(KernelContext& ctx);  // float32 to uint8 per tensor (quant_fast.cc)
Status QLinearAddFast(KernelContext& ctx);
Status QLinearLeakyReluFast(KernelContext& ctx);
// com.microsoft QLinearMul (any broadcast), QLinearSigmoid and QLinearConcat (qlinear_pointwise_fast.cc): bitwise
// the reference.
Status QLinearMulFast(KernelContext& ctx);
Status QLinearSigmoidFast(KernelContext& ctx);
Status QLinearConcatFast(KernelContext& ctx);
Status QLinearGlobalAveragePoolFast(KernelContext& ctx);  // NCHW planes (qlinear_fast.cc)
// ai.nee TableLookup (byte_lookup.cc): every byte through the 256-entry table, 32 bytes a step on AVX2.
Status TableLookupFast(KernelContext& ctx);
// com.microsoft QGemm (qlinear_fast.cc; the QDQ fusion's classifier Gemm): MatMulInteger's exact product, C,
// then the reference's float requantization; bitwise the reference.
Status QGemmFast(KernelContext& ctx);
// ---- end quantized block ----
// com.microsoft MatMulNBits with 4-bit weights (matmul_nbits_fast.cc): weights read 4-bit where they lie,
// dequantized per call into registers (few rows) or SGEMM's packed panels; float zero points to the reference.
Status MatMulNBitsFast(KernelContext& ctx);

// ---- Tree ensembles (tree_fast.cc) ----
// ai.onnx.ml TreeEnsembleClassifier/Regressor/TreeEnsemble: the reference kernels' driver with a faster
// tree walk for BRANCH_LEQ forests without missing-value tracking (SUM/AVERAGE); bitwise the reference.
Status TreeEnsembleClassifierFast(KernelContext& ctx);
Status TreeEnsembleRegressorFast(KernelContext& ctx);
Status TreeEnsembleFast(KernelContext& ctx);
// Tests: walk with the portable loop even where AVX-512 is available.
void TreeForcePortable(bool on);

}  // namespace nee::cpu
