// `nee bom MODEL`: a CycloneDX 1.6 ML-BOM (JSON) describing a model file: the
// model as a machine-learning-model component with its SHA-256, a model card
// (inputs and outputs with types and shapes, parameter count, opsets,
// producer, the custom metadata as properties) and a pedigree built from the
// model's lineage records (format/lineage.h). docs/lineage.md lists the fields.
#pragma once
#include <string>

#include "base/status.h"

namespace nee {

// The BOM for the model file at `path`, as indented JSON text.
Result<std::string> MakeMlBom(const std::string& path);

}  // namespace nee
