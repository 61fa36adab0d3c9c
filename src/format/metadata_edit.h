// `nee meta ... -o OUT`: a model's descriptive fields and metadata_props
// edited and written back, the weights carried byte for byte, and a lineage
// record ("meta") appended (format/lineage.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/onnx_writer.h"
#include "ir/graph.h"

namespace nee {

struct MetadataEdit {
  std::vector<std::pair<std::string, std::string>> set;  // metadata_props: replaced in place, or appended
  std::vector<std::string> remove;                       // metadata_props keys; each must exist
  std::optional<std::string> producer_name, producer_version, domain, doc_string;
  std::optional<int64_t> model_version;
};

// Applies `edit` to `model`. Lineage keys (nee.lineage.*) cannot be set or
// removed: the chain is append-only. Errors name the key.
Status ApplyMetadataEdit(Model& model, const MetadataEdit& edit);

// Whether any tensor of `model` (read from `path`) came from an external data file.
bool HasExternalData(const Model& model, const std::string& path);

// How to write a model read from `in_path` so that external data stays
// external: if it had any, initializers over 1 KiB (onnx.save's default
// threshold) go to "<OUT file name>.data" beside OUT, the rest inline.
WriteOptions KeepingExternalData(const Model& model, const std::string& in_path);

// Reads `in_path`, applies `edit`, appends the lineage record and writes
// `out_path` (with KeepingExternalData).
Status EditModelFile(const std::string& in_path, const std::string& out_path, const MetadataEdit& edit);

}  // namespace nee
