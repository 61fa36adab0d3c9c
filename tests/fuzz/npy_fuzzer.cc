// libFuzzer target for the .npy reader; a tensor that loads must write back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "format/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tensor = nee::ReadNpyBytes(nee::MappedFile::FromBytes(data, size));
  if (tensor.ok() && !nee::SerializeNpy(tensor.value()).ok()) std::abort();
  return 0;
}
