// libFuzzer target for the .pb value readers (the input_N.pb / output_N.pb
// files of ONNX tests and of `nee run --input`): a standalone TensorProto, and
// a value read as each kind a model input may declare.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "format/onnx_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = nee::MappedFile::FromBytes(data, size);
  auto tensor = nee::ReadTensorProto(bytes);
  if (!tensor.ok() && tensor.status().message().empty()) std::abort();

  const nee::TypeInfo float_tensor = nee::TypeInfo::Tensor(nee::DataType::kFloat);
  const nee::TypeInfo expected[] = {
      float_tensor,
      nee::TypeInfo::Sequence(float_tensor),
      nee::TypeInfo::Map(nee::DataType::kInt64, float_tensor),
      nee::TypeInfo::Optional(float_tensor),
  };
  for (const nee::TypeInfo& type : expected) {
    auto value = nee::ReadValueProtoBytes(bytes, &type);
    if (!value.ok() && value.status().message().empty()) std::abort();
  }
  auto untyped = nee::ReadValueProtoBytes(bytes, nullptr);
  if (!untyped.ok() && untyped.status().message().empty()) std::abort();
  return 0;
}
