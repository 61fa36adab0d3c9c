#include "ep/cpu/cpu_kernels.h"

#include "ep/cpu/column_map_fast.h"

#include "ops/op_registry.h"

namespace nee::cpu {

#ifdef NEE_MINIMAL
// The minimal build (CMake -DNEE_MINIMAL=ON) compiles none of the optimized
// kernels: the table is empty and every op runs its reference kernel.
const std::vector<OptimizedKernel>& OptimizedKernels() {
  static const std::vector<OptimizedKernel> kTable;
  return kTable;
}
#else
const std::vector<OptimizedKernel>& OptimizedKernels() {
  static const std::vector<OptimizedKernel> kTable = {
      {"", "MatMul", 1, 1000, MatMulFloatOrHalf, "float32; float16; bfloat16 with AVX512-BF16"},
      {"", "Gemm", 1, 1000, GemmFloatOrHalf, "float32; float16; bfloat16 with AVX512-BF16"},
      {"", "Conv", 1, 1000, ConvFloatOrBFloat16, "float32; bfloat16 with AVX512-BF16"},
      {"", "ConvTranspose", 1, 1000, ConvTransposeFloat, "float32"},
      // Before the float32 entry, which it hands float tensors to (pool_int8_fast.cc).
      {"", "MaxPool", 12, 1000, MaxPool8, "float32; uint8, int8 2-D from opset 12"},
      {"", "MaxPool", 1, 1000, MaxPoolFloat, "float32"},
      {"", "AveragePool", 1, 1000, AveragePoolFloat, "float32"},
      {"", "GlobalAveragePool", 1, 1000, GlobalAveragePoolFloat, "float32"},
      {"", "GlobalMaxPool", 1, 1000, GlobalMaxPoolFloat, "float32"},
      {"", "Exp", 1, 1000, ExpFloat, "float32"},
      {"", "Sigmoid", 1, 1000, SigmoidFloat, "float32"},
      {"", "Tanh", 1, 1000, TanhFloat, "float32"},
      {"", "Softmax", 1, 1000, SoftmaxFloat, "float32"},
      // ---- Element-wise, normalization, transpose (elementwise_fast.cc, normalization_fast.cc, ...) ----
      {"", "Add", 1, 1000, AddFloat, "float32"},
      {"", "Sub", 1, 1000, SubFloat, "float32"},
      {"", "Mul", 1, 1000, MulFloat, "float32"},
      {"", "Div", 1, 1000, DivFloat, "float32"},
      {"", "Pow", 1, 1000, PowFloat, "float32"},
      {"", "LayerNormalization", 1, 1000, LayerNormFloat, "float32"},
      {"com.microsoft", "SkipLayerNormalization", 1, 1000, SkipLayerNormFloat, "float32"},
      {"", "Relu", 1, 1000, ReluFloat, "float32"},
      {"", "LeakyRelu", 1, 1000, LeakyReluFloat, "float32"},
      {"", "HardSigmoid", 1, 1000, HardSigmoidFloat, "float32"},
      {"", "HardSwish", 1, 1000, HardSwishFloat, "float32"},
      {"", "Clip", 1, 1000, ClipFloat, "float32"},
      {"", "Neg", 1, 1000, NegFloat, "float32"},
      {"", "Sqrt", 1, 1000, SqrtFloat, "float32"},
      {"", "Reciprocal", 1, 1000, ReciprocalFloat, "float32"},
      {"", "Erf", 1, 1000, ErfFloat, "float32"},
      {"", "Gelu", 1, 1000, GeluFloat, "float32"},
      {"com.microsoft", "Gelu", 1, 1000, MsGeluFloat, "float32"},
      {"com.microsoft", "BiasGelu", 1, 1000, BiasGeluFloat, "float32"},
      {"com.microsoft", "FastGelu", 1, 1000, FastGeluFloat, "float32"},
      {"", "Transpose", 1, 1000, TransposeFast, "1-, 2- and 4-byte types"},
      {"", "Concat", 1, 1000, ConcatFast, "every type but string and 4-bit"},
      {"", "Split", 1, 1000, SplitFast, "every type but string and 4-bit"},
      {"", "Slice", 1, 1000, SliceFast, "every type but string and 4-bit"},
      {"", "Pad", 11, 1000, PadFast, "every type but string and 4-bit; pads >= 0, no axes"},
      {"", "ReduceSum", 1, 1000, ReduceSumFloat, "float32, one contiguous block of axes"},
      {"", "ReduceMean", 1, 1000, ReduceMeanFloat, "float32, one contiguous block of axes"},
      {"", "Cast", 1, 1000, CastFast, "float32 <-> float16, bfloat16; bool -> float32"},
      // ---- end element-wise block ----
      // ---- Fused ops written by the optimizer (src/opt) ----
      {"com.microsoft", "FusedConv", 1, 1000, FusedConvFloat, "float32"},
      {"ai.nee", "FusedConv", 1, 1000, FusedConvBFloat16, "bfloat16 with AVX512-BF16"},
      {"ai.nee", "ScaledDotProductAttention", 1, 1000, ScaledDotProductAttentionFloat, "float32"},
      {"ai.nee", "FusedMatMul", 1, 1000, FusedMatMulFloat, "float32"},
      {"ai.nee", "BlockedConv", 1, 1000, BlockedConvFloat, "float32"},
      {"ai.nee", "ToBlocked", 1, 1000, ToBlockedFloat, "float32"},
      {"ai.nee", "FromBlocked", 1, 1000, FromBlockedFloat, "float32"},
      {"ai.nee", "BlockedMaxPool", 1, 1000, BlockedMaxPoolFloat, "float32"},
      {"ai.nee", "BlockedGlobalAveragePool", 1, 1000, BlockedGlobalAveragePoolFloat, "float32"},
      {"ai.nee", "BlockedExpandDepthwise", 1, 1000, BlockedExpandDepthwiseFloat, "float32"},
      {"ai.nee", "TransposeColumnMap", 1, 1000, TransposeColumnMapFloat, "float32"},
      // ---- Resize (resize_fast.cc) ----
      {"", "Resize", 10, 1000, ResizeFast, "float32; uint8, int8 nearest"},
      {"", "Upsample", 7, 9, ResizeFast, "float32; uint8, int8 nearest"},
      // ---- end Resize block ----
      // ---- Recurrent (rnn_fast.cc) ----
      {"", "LSTM", 1, 1000, LstmFloat, "float32"},
      {"", "GRU", 1, 1000, GruFloat, "float32"},
      {"", "RNN", 1, 1000, RnnFloat, "float32"},
      // ---- end recurrent block ----
      // ---- Quantized (quant_fast.cc, qlstm_fast.cc) ----
      {"", "ConvInteger", 1, 1000, ConvIntegerFast, "uint8, int8"},
      {"", "MatMulInteger", 1, 1000, MatMulIntegerFast, "uint8, int8"},
      {"com.microsoft", "MatMulIntegerToFloat", 1, 1000, MatMulIntegerToFloatFast, "uint8, int8"},
      {"ai.nee", "ConvIntegerToFloat", 1, 1000, ConvIntegerToFloatFast, "uint8, int8"},
      {"", "QLinearMatMul", 10, 1000, QLinearMatMulFast, "uint8, int8"},
      {"", "DequantizeLinear", 10, 1000, DequantizeLinearFast, "uint8, int8 per tensor"},
      {"", "QuantizeLinear", 10, 1000, QuantizeLinearFast, "float32 to uint8 per tensor"},
      {"", "QLinearConv", 10, 1000, QLinearConvFast, "uint8, int8 (1-D, 2-D)"},
      {"com.microsoft", "QLinearAdd", 1, 1000, QLinearAddFast, "uint8, int8 same shape"},
      {"com.microsoft", "QLinearLeakyRelu", 1, 1000, QLinearLeakyReluFast, "uint8, int8"},
      {"com.microsoft", "QLinearMul", 1, 1000, QLinearMulFast, "uint8, int8"},
      {"com.microsoft", "QLinearSigmoid", 1, 1000, QLinearSigmoidFast, "uint8, int8"},
      {"com.microsoft", "QLinearConcat", 1, 1000, QLinearConcatFast, "uint8, int8"},
      {"ai.nee", "TableLookup", 1, 1000, TableLookupFast, "uint8, int8"},
      {"com.microsoft", "QLinearGlobalAveragePool", 1, 1000, QLinearGlobalAveragePoolFast, "uint8, int8 NCHW"},
      {"com.microsoft", "QGemm", 1, 1000, QGemmFast, "uint8, int8, no transA/transB"},
      {"", "DynamicQuantizeLinear", 1, 1000, DynamicQuantizeLinearFast, "float32"},
      {"com.microsoft", "DynamicQuantizeLSTM", 1, 1000, DynamicQuantizeLstmFast, "float32"},
      {"com.microsoft", "MatMulNBits", 1, 1000, MatMulNBitsFast, "float32, 4-bit weights"},
      // ---- end quantized block ----
      // ---- Tree ensembles (tree_fast.cc) ----
      {"ai.onnx.ml", "TreeEnsembleClassifier", 1, 1000, TreeEnsembleClassifierFast, "as the reference"},
      {"ai.onnx.ml", "TreeEnsembleRegressor", 1, 1000, TreeEnsembleRegressorFast, "as the reference"},
      {"ai.onnx.ml", "TreeEnsemble", 1, 1000, TreeEnsembleFast, "as the reference"},
  };
  return kTable;
}
#endif  // NEE_MINIMAL

const OptimizedKernel* FindOptimizedKernel(const OpSchema& schema) {
  if (!schema.kernel) return nullptr;
  const std::string domain = NormalizeDomain(schema.domain);
  for (const OptimizedKernel& k : OptimizedKernels())
    if (domain == k.domain && std::string(schema.name) == k.op && schema.since_version >= k.min_since_version &&
        schema.since_version <= k.max_since_version)
      return &k;
  return nullptr;
}

Status RunReference(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const OpSchema* schema, OpRegistry::Global().Resolve(node.domain, node.op_type, ctx.opset()));
  if (!schema->kernel) return NotImplemented(node.Describe() + ": no reference kernel");
  return schema->kernel(ctx);
}

Status RunReferenceOf(KernelContext& ctx, const char* op) {
  const Node& node = ctx.node();
  const int64_t opset = NormalizeDomain(node.domain).empty() ? ctx.opset() : 1000;
  NEE_ASSIGN_OR_RETURN(const OpSchema* schema, OpRegistry::Global().Resolve("", op, opset));
  if (!schema->kernel) return NotImplemented(node.Describe() + ": no reference kernel for " + op);
  return schema->kernel(ctx);
}

}  // namespace nee::cpu
