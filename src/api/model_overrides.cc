#include "api/model_overrides.h"

namespace nee {
namespace {

bool Matches(const Dim& dim, const DimOverride& o) {
  if (dim.known()) return false;  // only free dims are overridden, as in ONNX Runtime
  return o.by_denotation ? dim.denotation == o.name : dim.symbol == o.name;
}

void OverrideInputDims(const std::vector<DimOverride>& overrides, Graph& graph) {
  for (ValueInfo& input : graph.inputs) {
    if (!input.type.is_tensor() || !input.type.shape) continue;
    for (Dim& dim : *input.type.shape) {
      for (const DimOverride& o : overrides) {
        if (!Matches(dim, o)) continue;
        dim.value = o.value;
        dim.symbol.clear();
        break;
      }
    }
  }
}

Status ReplaceInitializer(const std::string& name, const Tensor& replacement, Graph& graph) {
  for (Initializer& init : graph.initializers) {
    if (init.name != name) continue;
    if (init.tensor.dtype() != replacement.dtype())
      return InvalidArgument("initializer '" + name + "' is " + DataTypeName(init.tensor.dtype()) +
                             " in the model but the supplied value is " + DataTypeName(replacement.dtype()));
    init.tensor = replacement;
    return Status::Ok();
  }
  return InvalidArgument("initializer '" + name + "' supplied in the session options is not an initializer of the "
                         "model's main graph");
}

}  // namespace

Status ApplyModelOverrides(const ModelOverrides& overrides, Model& model) {
  OverrideInputDims(overrides.dims, model.graph);
  for (const auto& [name, tensor] : overrides.initializers)
    NEE_RETURN_IF_ERROR(ReplaceInitializer(name, tensor, model.graph));
  return Status::Ok();
}

}  // namespace nee
