#include "ep/cpu/cpu_kernels.h"

#include "ops/op_registry.h"

namespace nee::cpu {

const std::vector<OptimizedKernel>& OptimizedKernels() {
  static const std::vector<OptimizedKernel> kTable = {
      {"", "MatMul", 1, 1000, MatMulFloat},
      {"", "Gemm", 1, 1000, GemmFloat},
      {"", "Conv", 1, 1000, ConvFloat},
      {"", "ConvTranspose", 1, 1000, ConvTransposeFloat},
      {"", "MaxPool", 1, 1000, MaxPoolFloat},
      {"", "AveragePool", 1, 1000, AveragePoolFloat},
      {"", "GlobalAveragePool", 1, 1000, GlobalAveragePoolFloat},
      {"", "Exp", 1, 1000, ExpFloat},
      {"", "Sigmoid", 1, 1000, SigmoidFloat},
      {"", "Tanh", 1, 1000, TanhFloat},
      {"", "Softmax", 1, 1000, SoftmaxFloat},
      // ---- Element-wise, normalization, transpose (elementwise_fast.cc, normalization_fast.cc, ...) ----
      {"", "Add", 1, 1000, AddFloat},
      {"", "Sub", 1, 1000, SubFloat},
      {"", "Mul", 1, 1000, MulFloat},
      {"", "Div", 1, 1000, DivFloat},
      {"", "Pow", 1, 1000, PowFloat},
      {"", "LayerNormalization", 1, 1000, LayerNormFloat},
      {"com.microsoft", "SkipLayerNormalization", 1, 1000, SkipLayerNormFloat},
      {"", "Relu", 1, 1000, ReluFloat},
      {"", "LeakyRelu", 1, 1000, LeakyReluFloat},
      {"", "HardSigmoid", 1, 1000, HardSigmoidFloat},
      {"", "HardSwish", 1, 1000, HardSwishFloat},
      {"", "Clip", 1, 1000, ClipFloat},
      {"", "Neg", 1, 1000, NegFloat},
      {"", "Sqrt", 1, 1000, SqrtFloat},
      {"", "Reciprocal", 1, 1000, ReciprocalFloat},
      {"", "Erf", 1, 1000, ErfFloat},
      {"", "Gelu", 1, 1000, GeluFloat},
      {"com.microsoft", "Gelu", 1, 1000, MsGeluFloat},
      {"com.microsoft", "BiasGelu", 1, 1000, BiasGeluFloat},
      {"com.microsoft", "FastGelu", 1, 1000, FastGeluFloat},
      {"", "Transpose", 1, 1000, TransposeFast},
      {"", "Concat", 1, 1000, ConcatFast},
      {"", "Split", 1, 1000, SplitFast},
      {"", "Slice", 1, 1000, SliceFast},
      // ---- end element-wise block ----
      // ---- Fused ops written by the optimizer (src/opt) ----
      {"com.microsoft", "FusedConv", 1, 1000, FusedConvFloat},
      {"ai.nee", "ScaledDotProductAttention", 1, 1000, ScaledDotProductAttentionFloat},
      {"ai.nee", "FusedMatMul", 1, 1000, FusedMatMulFloat},
      // ---- Resize (resize_fast.cc) ----
      {"", "Resize", 10, 1000, ResizeFloat},
      {"", "Upsample", 7, 9, ResizeFloat},
      // ---- end Resize block ----
      // ---- Recurrent (rnn_fast.cc) ----
      {"", "LSTM", 1, 1000, LstmFloat},
      {"", "GRU", 1, 1000, GruFloat},
      {"", "RNN", 1, 1000, RnnFloat},
      // ---- end recurrent block ----
      // ---- Tree ensembles (tree_fast.cc) ----
      {"ai.onnx.ml", "TreeEnsembleClassifier", 1, 1000, TreeEnsembleClassifierFast},
      {"ai.onnx.ml", "TreeEnsembleRegressor", 1, 1000, TreeEnsembleRegressorFast},
      {"ai.onnx.ml", "TreeEnsemble", 1, 1000, TreeEnsembleFast},
  };
  return kTable;
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
