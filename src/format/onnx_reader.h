// Reads ONNX models (ModelProto) and value files (TensorProto, SequenceProto,
// MapProto, OptionalProto) from the protobuf wire format into nee's IR, without
// libprotobuf. Initializer bytes stay in the mapped file where alignment
// allows (zero copy); every length, count and offset is checked, and a
// malformed file gives InvalidModel("... at <field path> (byte offset N)").
#pragma once
#include <map>
#include <memory>
#include <string>

#include "base/mapped_file.h"
#include "base/status.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "ir/type_info.h"
#include "ir/value.h"

namespace nee {

struct ReadOptions {
  // Folder external data paths are resolved against; empty = external data
  // is refused.
  std::string base_dir;
  // Limit on protobuf message nesting (subgraphs, nested types).
  int max_depth = 64;
  // Tensors the caller supplies for tensors stored as external data, by name
  // (ONNX Runtime's add_external_initializers): used instead of the external
  // file, which then need not exist. Each must have the stored tensor's
  // element type and dims; a name that matches no external tensor is an error.
  std::map<std::string, Tensor> external_initializers;
  // Most bytes any one tensor read from the file (inline or external data)
  // may claim; a larger shape is refused before any of its data is touched.
  // <= 0: the hard cap kMaxTensorBytes.
  int64_t max_tensor_bytes = int64_t{16} << 30;
  // Most bytes of external data all of the model's tensors together may
  // map. <= 0: no limit beyond max_tensor_bytes per tensor.
  int64_t max_external_data_bytes = int64_t{64} << 30;
};

// Maps `path` and reads the model; external data is resolved relative to the
// file's folder.
Result<Model> ReadModelFile(const std::string& path);
// The same with `options` (limits, supplied external initializers); its
// base_dir is replaced by the file's folder.
Result<Model> ReadModelFile(const std::string& path, ReadOptions options);
Result<Model> ReadModelBytes(std::shared_ptr<MappedFile> bytes, const ReadOptions& options);

// A standalone TensorProto (the .pb input/output files of ONNX tests). Raw
// data views into `bytes` where aligned. External data is refused.
Result<Tensor> ReadTensorProto(std::shared_ptr<MappedFile> bytes);

// A .pb file holding a TensorProto, SequenceProto, MapProto or OptionalProto.
// The kind is decided by trying each strictly (a field the message does not
// define or a wrong wire type rejects it). Beware: an OptionalProto holding a
// tensor has the same bytes as a one-element SequenceProto; this function
// prefers the sequence. Use ReadValueProtoFileAs when the type is known.
Result<Value> ReadValueProtoFile(const std::string& path);
// As above, with the expected type (e.g. the model input's) choosing the
// message kind: tensor -> TensorProto, seq -> SequenceProto, map -> MapProto,
// optional -> OptionalProto.
Result<Value> ReadValueProtoFileAs(const std::string& path, const TypeInfo& expected_type);
Result<Value> ReadValueProtoBytes(std::shared_ptr<MappedFile> bytes, const TypeInfo* expected_type);

}  // namespace nee
