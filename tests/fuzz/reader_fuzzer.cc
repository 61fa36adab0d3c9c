// libFuzzer target for the ONNX reader: any byte string must either load or
// fail with an error, never crash, hang or allocate beyond what the input can
// justify. A model that loads must also serialize and load again (the writer
// accepts everything the reader produces).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "format/onnx_reader.h"
#include "format/onnx_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = nee::MappedFile::FromBytes(data, size);
  nee::ReadOptions options;  // no base_dir: external data is refused
  auto model = nee::ReadModelBytes(bytes, options);
  if (model.ok()) {
    auto serialized = nee::SerializeModel(model.value());
    if (!serialized.ok()) std::abort();  // the writer must accept what the reader made
    auto again = nee::ReadModelBytes(
        nee::MappedFile::FromBytes(serialized.value().data(), serialized.value().size()), options);
    if (!again.ok()) std::abort();
  } else if (model.status().message().empty()) {
    std::abort();  // every error explains itself
  }
  // The same bytes as a value file (tensor / sequence / map / optional).
  auto value = nee::ReadValueProtoBytes(bytes, nullptr);
  if (value.ok()) {
    // May fail (e.g. a sequence mixing kinds), but must not crash.
    auto serialized = nee::SerializeValueProto(value.value(), "v");
    (void)serialized;
  }
  return 0;
}
