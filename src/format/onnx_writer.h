// Writes nee's IR back to the ONNX protobuf wire format (no libprotobuf).
// Field order and encoding follow what protobuf itself emits (fields by
// number, proto2 repeated scalars unpacked, tensor bytes as raw_data), so a
// model read from a protobuf-written file usually serializes to the same bytes
// (SerializeModel; WriteModelFile too with align_tensor_data off).
#pragma once
#include <cstdint>
#include <string>

#include "base/status.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "ir/value.h"

namespace nee {

struct WriteOptions {
  // Initializers with more bytes than this go to the external data file;
  // -1 keeps everything inside the model file.
  int64_t external_data_threshold = -1;
  // File name (relative to the model's folder) for external data; empty =
  // "<model file name>.data".
  std::string external_data_file;
  // Pads (with an unknown field every protobuf reader skips) so each
  // initializer's raw_data starts 64-byte aligned in the file: nee then
  // maps it in place instead of copying. Off = protobuf's exact layout.
  bool align_tensor_data = true;
};

Result<std::string> SerializeModel(const Model& model);
// Writes atomically (temporary file + rename), so overwriting the file a
// model's tensors are still mapped from is safe. External data offsets are
// 4096-aligned so they map aligned.
Status WriteModelFile(const Model& model, const std::string& path, const WriteOptions& options = {});
Result<std::string> SerializeTensorProto(const Tensor& tensor, const std::string& name);
// A value as the .pb files of ONNX tests hold it: TensorProto, SequenceProto,
// MapProto (values as a sequence of one tensor per key), or an empty
// OptionalProto for Value::None. (A present optional is written as what it
// holds, since Value does not distinguish it.)
Result<std::string> SerializeValueProto(const Value& value, const std::string& name);

}  // namespace nee
