// Edits ONNX Runtime's SessionOptions make to a model before it is checked:
// free dimension overrides (a symbolic input dim fixed to a size, chosen by
// its dim_param or its denotation) and initializers supplied by the caller in
// place of the model's (add_initializer; add_external_initializers, which the
// reader takes instead of external data: ReadOptions::external_initializers).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "ir/graph.h"

namespace nee {

struct DimOverride {
  std::string name;  // a dim_param, or a denotation (e.g. DATA_BATCH)
  bool by_denotation = false;
  int64_t value = 0;
};

struct ModelOverrides {
  std::vector<DimOverride> dims;
  std::vector<std::pair<std::string, Tensor>> initializers;  // name -> replacement (owned copies)
  std::map<std::string, Tensor> external_initializers;  // for tensors stored as external data

  bool empty() const { return dims.empty() && initializers.empty() && external_initializers.empty(); }
};

// Applies `overrides` to the main graph. A replacement initializer must name
// an initializer of the model and have its element type.
Status ApplyModelOverrides(const ModelOverrides& overrides, Model& model);

}  // namespace nee
