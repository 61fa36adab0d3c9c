// libFuzzer target for what follows the reader at session creation: function
// inlining, the checker with shape/type inference, and the optimizer (whose
// constant folding runs reference kernels on the model's initializers). Any
// model must be accepted or refused with a message, never crash. One
// invariant: a model the checker accepted and the optimizer rewrote without
// error must still pass the checker.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "check/checker.h"
#include "format/onnx_reader.h"
#include "ir/inline_functions.h"
#include "ops/op_registry.h"
#include "opt/pass_manager.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nee::ReadOptions read_options;  // no base_dir: external data is refused
  auto model = nee::ReadModelBytes(nee::MappedFile::FromBytes(data, size), read_options);
  if (!model.ok()) return 0;  // the reader fuzzer covers this side
  nee::Model& m = model.value();
  nee::Status inlined = nee::InlineModelFunctions(m);
  if (!inlined.ok()) {
    if (inlined.message().empty()) std::abort();
    return 0;
  }
  const nee::OpRegistry& registry = nee::OpRegistry::Global();
  auto checked = nee::CheckModel(m, registry);
  if (!checked.ok()) {
    if (checked.status().message().empty()) std::abort();  // every error explains itself
    return 0;
  }
  nee::Status optimized = nee::OptimizeModel(m, 99);
  if (!optimized.ok()) {
    if (optimized.message().empty()) std::abort();
    return 0;
  }
  if (!nee::CheckModel(m, registry).ok()) std::abort();  // the optimizer broke a valid graph
  return 0;
}
