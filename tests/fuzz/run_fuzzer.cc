// libFuzzer target for loading and running small models: the input is a
// model followed by the bytes its inputs are filled from, so mutations reach
// both the attributes (inside the model) and the input values.
//
//   [u32 little-endian n][n bytes: ModelProto][rest: input bytes]
//
// Every graph input that is a non-string tensor gets its declared shape
// (unknown dims become 1..4, taken from the input bytes) and its element
// bytes from the rest, repeated as needed. The session runs on one thread
// with a time and memory limit, as a server facing untrusted models would.
// Creating the session and running it may fail, but only with a message.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "exec/session.h"
#include "format/onnx_reader.h"

namespace {

constexpr int64_t kMaxInputElements = 1 << 14;

// Cycles through the input bytes; an empty tail reads as zeros.
struct ByteSource {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
  uint8_t Next() { return size == 0 ? 0 : data[pos++ % size]; }
};

// A tensor for `info`, or false when the fuzzer does not feed this kind.
bool MakeInput(const nee::TypeInfo& info, ByteSource& bytes, nee::Tensor* out) {
  if (!info.is_tensor() || info.elem_type == nee::DataType::kString ||
      info.elem_type == nee::DataType::kUndefined)
    return false;
  std::vector<int64_t> dims;
  if (info.shape) {
    for (const nee::Dim& d : *info.shape) dims.push_back(d.known() ? d.value : 1 + bytes.Next() % 4);
  }
  auto count = nee::CheckedElementCount(dims);
  if (!count.ok() || count.value() > kMaxInputElements) return false;
  auto tensor = nee::Tensor::AllocateUninitialized(info.elem_type, dims);
  if (!tensor.ok()) return false;
  auto* raw = static_cast<uint8_t*>(tensor.value().raw_data());
  for (size_t i = 0; i < tensor.value().byte_size(); ++i) raw[i] = bytes.Next();
  if (info.elem_type == nee::DataType::kBool)  // a bool byte other than 0/1 is undefined in C++
    for (size_t i = 0; i < tensor.value().byte_size(); ++i) raw[i] &= 1;
  *out = std::move(tensor.value());
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t model_size = 0;
  std::memcpy(&model_size, data, 4);
  if (model_size > size - 4) return 0;
  ByteSource bytes{data + 4 + model_size, size - 4 - model_size};

  nee::SessionOptions options;
  options.intra_op_num_threads = 1;
  options.run_timeout_ms = 2000;
  options.run_memory_limit_bytes = 256 << 20;
  auto session = nee::Session::CreateFromBytes(data + 4, model_size, options);
  if (!session.ok()) {
    if (session.status().message().empty()) std::abort();
    return 0;
  }
  std::vector<nee::NamedValue> feeds;
  for (const nee::ValueInfo& input : session.value()->inputs()) {
    nee::Tensor t;
    if (!MakeInput(input.type, bytes, &t)) return 0;
    feeds.push_back({input.name, nee::Value(std::move(t))});
  }
  auto outputs = session.value()->Run(feeds, {});
  if (!outputs.ok() && outputs.status().message().empty()) std::abort();
  return 0;
}
