// Lineage records: each transformation nee performs on a model file (today
// `nee optimize` and `nee meta` edits; later quantize and convert) appends
// one record to the written model's metadata_props, so the model carries the
// chain from the trained export to the deployed artifact. docs/lineage.md
// describes the format and how to re-verify the hashes without nee.
//
// A record is the metadata entry `nee.lineage.<N>` (N = 1, 2, ... in the
// order they were made) whose value is a JSON object:
//   {"tool": "nee", "version": "0.1.0", "action": "optimize",
//    "parameters": {...},
//    "input": {"file": "model.onnx", "sha256": <file>, "weights_sha256": <weights>},
//    "output": {"weights_sha256": <weights>},
//    "weights_digest": "nee-weights-sha256-v1", "time": "2026-12-02T07:12:56Z"}
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "ir/graph.h"

namespace nee {

inline constexpr const char* kLineageKeyPrefix = "nee.lineage.";
inline constexpr const char* kWeightsDigestName = "nee-weights-sha256-v1";

bool IsLineageKey(const std::string& key);

// SHA-256 (hex) of the main graph's initializers in graph order, each framed
// as: u64 name length, name bytes, u64 elem_type (ONNX numbering), u64 rank,
// each dim as i64, u64 data length, data (all integers little-endian). The
// data is the tensor's raw little-endian bytes as TensorProto.raw_data holds
// them (sub-byte types packed); for string tensors, each element as u64
// length + bytes. Where the bytes live (inline or external data) does not
// matter.
std::string WeightsSha256(const Graph& graph);

// One `nee.lineage.<N>` entry as read back.
struct LineageRecord {
  std::string key;
  int64_t index = 0;   // N; -1 when the key is not numbered
  Json json;           // the parsed record (an object when `error` is empty)
  std::string error;   // why the entry is not a readable record, or ""

  std::string Field(const char* section, const char* name) const;  // json[section][name] if a string
  std::string Summary() const;  // "optimize (opt_level=99) by nee 0.1.0 at <time>"
};

// The records in `props`, ordered by N (unnumbered keys last, by key).
std::vector<LineageRecord> ReadLineage(const std::vector<std::pair<std::string, std::string>>& props);

// Records a transformation: Begin() describes the input before it changes,
// Append() adds the record to the model about to be written.
class LineageRecorder {
 public:
  // `path` is the file `model` was read from (hashed here).
  static Result<LineageRecorder> Begin(const std::string& path, const Model& model);
  // Appends `nee.lineage.<N>` to out.metadata_props: `action` ("optimize",
  // "meta", ...) with `parameters` (a JSON object), the input described by
  // Begin(), and the weights of `out` as they will be written.
  Status Append(Model& out, const std::string& action, Json parameters) const;

 private:
  std::string input_file_, input_sha256_, input_weights_sha256_;
};

// Re-verification of a model's chain, one entry per record.
struct LineageCheck {
  std::string key;
  bool ok = false;
  std::string message;  // what was compared, or why it failed
};
// The last record's output weights must hash like this model's weights; each
// earlier record's output weights must equal the next record's input weights
// (nothing changed the weights between two nee steps). The recorded input
// file hashes name files that are not at hand and are listed, not checked.
std::vector<LineageCheck> VerifyLineage(const Model& model);

// Now as "YYYY-MM-DDTHH:MM:SSZ" (UTC), or SOURCE_DATE_EPOCH's time when that
// environment variable is set (reproducible outputs).
std::string UtcTimestamp();

}  // namespace nee
