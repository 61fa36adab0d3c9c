#include "format/ml_bom.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "base/json.h"
#include "base/sha256.h"
#include "format/lineage.h"
#include "format/onnx_reader.h"
#include "ir/graph.h"

#ifndef NEE_VERSION_STRING
#define NEE_VERSION_STRING "unknown"
#endif

namespace nee {

namespace {

std::string BaseName(const std::string& path) { return std::filesystem::path(path).filename().string(); }

Json Property(const std::string& name, const std::string& value) {
  return Json::Object().Set("name", name).Set("value", value);
}

Json Sha256Hashes(const std::string& hex) {
  return Json::Array().Push(Json::Object().Set("alg", "SHA-256").Set("content", hex));
}

// Parameters in the graph and every subgraph (what `nee inspect` counts).
int64_t ParameterCount(const Graph& graph) {
  int64_t count = 0;
  for (const Initializer& init : graph.initializers) count += init.tensor.num_elements();
  for (const Node& node : graph.nodes)
    for (const Attribute& a : node.attributes) {
      if (a.g) count += ParameterCount(*a.g);
      for (const auto& g : a.graphs)
        if (g) count += ParameterCount(*g);
    }
  return count;
}

// "x: tensor(float) [batch,8]" for the model card's input/output format.
std::string ValueFormat(const ValueInfo& v) {
  std::string text = v.name + ": " + v.type.ToString();
  if (v.type.kind == TypeInfo::Kind::kTensor && v.type.shape) text += " " + ShapeToString(*v.type.shape);
  return text;
}

// A "YYYY-MM-DDTHH:MM:SSZ" time as lineage records write it (anything else
// read from a file is left out rather than put in a date-time field).
bool IsRecordTime(const std::string& t) {
  static const char kPattern[] = "dddd-dd-ddTdd:dd:ddZ";
  if (t.size() != sizeof(kPattern) - 1) return false;
  for (size_t i = 0; i < t.size(); ++i)
    if (kPattern[i] == 'd' ? (t[i] < '0' || t[i] > '9') : t[i] != kPattern[i]) return false;
  return true;
}

// A v4-form UUID URN: random, or derived from `seed` when SOURCE_DATE_EPOCH
// asks for reproducible output.
std::string SerialNumber(const std::string& seed) {
  std::string hex = Sha256Hex(seed.data(), seed.size());
  if (!std::getenv("SOURCE_DATE_EPOCH")) {
    std::random_device random;
    std::string salted = seed + std::to_string(random()) + std::to_string(random());
    hex = Sha256Hex(salted.data(), salted.size());
  }
  hex[12] = '4';                                             // version 4
  hex[16] = "89ab"[std::stoi(hex.substr(16, 1), nullptr, 16) & 3];  // RFC 4122 variant
  return "urn:uuid:" + hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20, 12);
}

Json ModelCard(const Model& model) {
  Json inputs = Json::Array(), outputs = Json::Array();
  for (const ValueInfo& v : model.graph.inputs)
    if (!model.graph.FindInitializer(v.name)) inputs.Push(Json::Object().Set("format", ValueFormat(v)));
  for (const ValueInfo& v : model.graph.outputs) outputs.Push(Json::Object().Set("format", ValueFormat(v)));
  Json properties = Json::Array();
  properties.Push(Property("nee:parameter-count", std::to_string(ParameterCount(model.graph))));
  properties.Push(Property("onnx:ir-version", std::to_string(model.ir_version)));
  for (const OpsetImport& o : model.opset_imports)
    properties.Push(Property("onnx:opset:" + (o.domain.empty() ? std::string("ai.onnx") : o.domain),
                             std::to_string(o.version)));
  properties.Push(Property("onnx:producer-name", model.producer_name));
  properties.Push(Property("onnx:producer-version", model.producer_version));
  if (!model.domain.empty()) properties.Push(Property("onnx:domain", model.domain));
  if (!model.graph.name.empty()) properties.Push(Property("onnx:graph-name", model.graph.name));
  for (const auto& [key, value] : model.metadata_props)
    if (!IsLineageKey(key)) properties.Push(Property("onnx:metadata:" + key, value));
  Json parameters = Json::Object();
  parameters.Set("inputs", std::move(inputs)).Set("outputs", std::move(outputs));
  return Json::Object().Set("modelParameters", std::move(parameters)).Set("properties", std::move(properties));
}

// Ancestors (each record's input) and commits (each record) from the lineage.
Json Pedigree(const Model& model) {
  Json ancestors = Json::Array(), commits = Json::Array();
  std::string notes;
  for (const LineageRecord& r : ReadLineage(model.metadata_props)) {
    if (!r.error.empty()) {
      notes += r.key + " is unreadable (" + r.error + ") and left out. ";
      continue;
    }
    Json ancestor = Json::Object();
    ancestor.Set("type", "machine-learning-model").Set("bom-ref", r.key + ".input");
    ancestor.Set("name", r.Field("input", "file").empty() ? "unnamed" : r.Field("input", "file"));
    if (!r.Field("input", "sha256").empty()) ancestor.Set("hashes", Sha256Hashes(r.Field("input", "sha256")));
    Json properties = Json::Array();
    properties.Push(Property("nee:weights-sha256", r.Field("input", "weights_sha256")));
    properties.Push(Property("nee:lineage-record", r.key));
    ancestors.Push(ancestor.Set("properties", std::move(properties)));

    Json committer = Json::Object();
    if (IsRecordTime(r.json.StringAt("time"))) committer.Set("timestamp", r.json.StringAt("time"));
    committer.Set("name", r.json.StringAt("tool") + " " + r.json.StringAt("version"));
    commits.Push(Json::Object()
                     .Set("uid", r.key)
                     .Set("committer", std::move(committer))
                     .Set("message", r.Summary() + "; output weights sha256 " + r.Field("output", "weights_sha256")));
  }
  Json pedigree = Json::Object();
  if (ancestors.items().empty() && notes.empty()) return pedigree;
  pedigree.Set("ancestors", std::move(ancestors)).Set("commits", std::move(commits));
  pedigree.Set("notes", "Built from the model's nee.lineage records (oldest first); the weights digest is " +
                            std::string(kWeightsDigestName) + ". " + notes);
  return pedigree;
}

}  // namespace

Result<std::string> MakeMlBom(const std::string& path) {
  NEE_ASSIGN_OR_RETURN(Model model, ReadModelFile(path));
  NEE_ASSIGN_OR_RETURN(std::string file_sha, Sha256OfFile(path));
  const std::string weights_sha = WeightsSha256(model.graph);
  const std::string time = UtcTimestamp();

  Json component = Json::Object();
  component.Set("type", "machine-learning-model").Set("bom-ref", "model");
  component.Set("name", BaseName(path));
  if (model.model_version != 0) component.Set("version", std::to_string(model.model_version));
  if (!model.doc_string.empty()) component.Set("description", model.doc_string);
  component.Set("hashes", Sha256Hashes(file_sha));
  Json pedigree = Pedigree(model);
  if (!pedigree.members().empty()) component.Set("pedigree", std::move(pedigree));
  // External data files, each with its own hash, as parts of the model.
  Json parts = Json::Array();
  for (const auto& mapping : model.mappings) {
    if (!mapping || mapping->path() == path) continue;
    Json part = Json::Object();
    part.Set("type", "data").Set("bom-ref", "external-data-" + std::to_string(parts.items().size() + 1));
    part.Set("name", BaseName(mapping->path()));
    part.Set("hashes", Sha256Hashes(Sha256Hex(mapping->data(), mapping->size())));
    parts.Push(std::move(part));
  }
  if (!parts.items().empty()) component.Set("components", std::move(parts));
  component.Set("modelCard", ModelCard(model));
  component.Set("properties", Json::Array()
                                  .Push(Property("nee:weights-sha256", weights_sha))
                                  .Push(Property("nee:weights-digest", kWeightsDigestName)));

  Json tool = Json::Object().Set("type", "application").Set("name", "nee").Set("version", NEE_VERSION_STRING);
  Json metadata = Json::Object();
  metadata.Set("timestamp", time);
  metadata.Set("tools", Json::Object().Set("components", Json::Array().Push(std::move(tool))));
  Json bom = Json::Object();
  bom.Set("$schema", "http://cyclonedx.org/schema/bom-1.6.schema.json")
      .Set("bomFormat", "CycloneDX")
      .Set("specVersion", "1.6")
      .Set("serialNumber", SerialNumber(file_sha + time))
      .Set("version", Json::Number(1))
      .Set("metadata", std::move(metadata))
      .Set("components", Json::Array().Push(std::move(component)));
  return bom.Serialize(2) + "\n";
}

}  // namespace nee
