// Compiling the ai.onnx.ml tree ensembles' attributes into the flat Forest of
// ml_tree.h (ml_tree_compile.cc), and the attribute readers that the kernels
// in ml_tree.cc share with it. Internal to ops/.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/ml_tree.h"
#include "ops/op_registry.h"

namespace nee::ml_tree {

// Attribute readers (see ml_tree_compile.cc).
Result<std::vector<double>> ReadReals(const Node& node, const std::string& name);
Result<std::vector<double>> ReadRealTensor(const Node& node, const std::string& name, bool required);
Result<const std::vector<int64_t>*> IntsRef(const Node& node, const std::string& name, bool required);
Result<const std::vector<std::string>*> StringsRef(const Node& node, const std::string& name);
Result<Aggregate> ParseAggregate(const Node& node);

// TreeEnsembleClassifier/Regressor (ml opsets 1 and 3); `weights_prefix` is
// "class" or "target".
Result<Forest> CompileLegacyForest(const Node& node, int64_t width, int64_t targets, const std::string& weights_prefix);
// TreeEnsemble (ml opset 5).
Result<Forest> CompileForest5(const Node& node, int64_t width);

}  // namespace nee::ml_tree
