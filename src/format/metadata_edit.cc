#include "format/metadata_edit.h"

#include "base/json.h"
#include "format/lineage.h"
#include "format/onnx_reader.h"

namespace nee {

namespace {

constexpr int64_t kExternalThresholdBytes = 1024;

Status RefuseLineageKey(const std::string& key, const char* what) {
  return InvalidArgument("metadata key '" + key + "' is a lineage record and cannot be " + what +
                         " (the chain is append-only)");
}

// The parameters of the "meta" lineage record: what was set and removed.
Json EditParameters(const MetadataEdit& edit) {
  Json parameters = Json::Object();
  Json fields = Json::Object();
  if (edit.producer_name) fields.Set("producer_name", *edit.producer_name);
  if (edit.producer_version) fields.Set("producer_version", *edit.producer_version);
  if (edit.domain) fields.Set("domain", *edit.domain);
  if (edit.model_version) fields.Set("model_version", Json::Number(static_cast<double>(*edit.model_version)));
  if (edit.doc_string) fields.Set("doc_string", *edit.doc_string);
  if (!fields.members().empty()) parameters.Set("fields", std::move(fields));
  if (!edit.set.empty()) {
    Json set = Json::Object();
    for (const auto& [key, value] : edit.set) set.Set(key, value);
    parameters.Set("set", std::move(set));
  }
  if (!edit.remove.empty()) {
    Json removed = Json::Array();
    for (const std::string& key : edit.remove) removed.Push(Json::String(key));
    parameters.Set("delete", std::move(removed));
  }
  return parameters;
}

}  // namespace

Status ApplyMetadataEdit(Model& model, const MetadataEdit& edit) {
  auto& props = model.metadata_props;
  for (const std::string& key : edit.remove) {
    if (IsLineageKey(key)) return RefuseLineageKey(key, "deleted");
    size_t before = props.size();
    std::erase_if(props, [&key](const auto& entry) { return entry.first == key; });
    if (props.size() == before) return InvalidArgument("--delete " + key + ": the model has no metadata key '" + key + "'");
  }
  for (const auto& [key, value] : edit.set) {
    if (IsLineageKey(key)) return RefuseLineageKey(key, "set");
    if (key.empty()) return InvalidArgument("--set: the metadata key is empty");
    bool replaced = false;
    for (auto& entry : props)
      if (entry.first == key) {
        entry.second = value;
        replaced = true;
      }
    if (!replaced) props.emplace_back(key, value);
  }
  if (edit.producer_name) model.producer_name = *edit.producer_name;
  if (edit.producer_version) model.producer_version = *edit.producer_version;
  if (edit.domain) model.domain = *edit.domain;
  if (edit.model_version) model.model_version = *edit.model_version;
  if (edit.doc_string) model.doc_string = *edit.doc_string;
  return Status::Ok();
}

bool HasExternalData(const Model& model, const std::string& path) {
  for (const auto& mapping : model.mappings)
    if (mapping && mapping->path() != path) return true;
  return false;
}

WriteOptions KeepingExternalData(const Model& model, const std::string& in_path) {
  WriteOptions options;
  if (HasExternalData(model, in_path)) options.external_data_threshold = kExternalThresholdBytes;
  return options;
}

Status EditModelFile(const std::string& in_path, const std::string& out_path, const MetadataEdit& edit) {
  NEE_ASSIGN_OR_RETURN(Model model, ReadModelFile(in_path));
  NEE_ASSIGN_OR_RETURN(LineageRecorder lineage, LineageRecorder::Begin(in_path, model));
  NEE_RETURN_IF_ERROR(ApplyMetadataEdit(model, edit));
  NEE_RETURN_IF_ERROR(lineage.Append(model, "meta", EditParameters(edit)));
  return WriteModelFile(model, out_path, KeepingExternalData(model, in_path));
}

}  // namespace nee
