// `nee optimize`: a model file optimized once, written back as standard ONNX.
// The fused ops are ONNX Runtime's com.microsoft contrib ops (FusedConv, Gelu,
// SkipLayerNormalization, ...) and nee's own ai.nee ops (FusedMatMul,
// ScaledDotProductAttention, the channel-blocked BlockedConv and its
// reorders), whose schemas nee registers, so nee checks the file like any
// other; ONNX Runtime cannot run a file holding ai.nee ops. The level goes
// into the metadata (kOptimizedLevelKey) and a session at that level loads
// the file without optimizing it again.
#pragma once
#include <string>

#include "base/status.h"

namespace nee {

// Reads `in_path`, expands model-local functions, runs the passes up to
// `level` and writes the result to `out_path`. Returns a table of what each
// pass changed (node counts before and after).
Result<std::string> OptimizeModelFile(const std::string& in_path, const std::string& out_path, int level);

}  // namespace nee
