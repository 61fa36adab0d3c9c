// Protobuf wire-format decoding primitives for the ONNX reader: a bounds-
// checked cursor over a byte range, field-by-field message iteration, and the
// field path ("graph.node[3].attribute[0]") that every error message carries.
// No libprotobuf: the ONNX schema is small and stable enough to decode by
// hand, which keeps initializer bytes in place (zero copy).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace nee::format {

enum class WireType : uint8_t {
  kVarint = 0,
  kFixed64 = 1,
  kLen = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};
const char* WireTypeName(WireType type);

// A run of bytes inside the decoded buffer.
struct ByteRange {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::string_view view() const { return {reinterpret_cast<const char*>(data), size}; }
};

// One field as it appears on the wire.
struct Field {
  uint32_t number = 0;
  WireType wire_type = WireType::kVarint;
  uint64_t scalar = 0;  // varint value, or fixed32 / fixed64 bits
  // kLen: the payload. Scalars: the encoded value bytes, so one unpacked
  // element can be decoded like a packed run of one.
  ByteRange payload;
  size_t offset = 0;  // byte offset of the tag within the whole buffer
};

// Names a message's fields for error messages.
struct FieldName {
  uint32_t number;
  const char* name;
};

// Shared state of one decode: where the buffer starts (for byte offsets), the
// path of enclosing messages, and the depth limit.
class Decoder {
 public:
  Decoder(const uint8_t* begin, size_t size, int max_depth, std::string root_name);

  const uint8_t* begin() const { return begin_; }
  size_t size() const { return size_; }
  size_t OffsetOf(const uint8_t* p) const { return static_cast<size_t>(p - begin_); }

  // "graph.node[3].attribute[0]" (+ ".field" when given).
  std::string Path(const char* field = nullptr, int64_t index = -1) const;
  // InvalidModel("<what> at <path> (byte offset N)").
  Status Error(const std::string& what, size_t offset, const char* field = nullptr,
               int64_t index = -1) const;

  // Enters a nested message (pushes it on the path); fails past max_depth.
  Status Enter(const char* name, int64_t index, size_t offset);
  void Leave() { path_.pop_back(); }
  int depth() const { return static_cast<int>(path_.size()); }

  // Strict mode: unknown fields are errors too (used to tell apart the
  // message kinds a value file may hold).
  bool strict() const { return strict_; }
  void set_strict(bool strict) { strict_ = strict; }

 private:
  struct PathEntry {
    const char* name;
    int64_t index;
  };
  const uint8_t* begin_;
  size_t size_;
  int max_depth_;
  std::string root_name_;
  std::vector<PathEntry> path_;
  bool strict_ = false;
};

// Leaves the message scope entered by Decoder::Enter on destruction.
class ScopeExit {
 public:
  explicit ScopeExit(Decoder& d) : d_(d) {}
  ~ScopeExit() { d_.Leave(); }
  ScopeExit(const ScopeExit&) = delete;
  ScopeExit& operator=(const ScopeExit&) = delete;

 private:
  Decoder& d_;
};

// Iterates the fields of one message. Typed accessors check the wire type of
// known fields; a mismatch is an error naming the field (protobuf writers
// never produce one, so it indicates corruption).
class MessageReader {
 public:
  MessageReader(Decoder& d, ByteRange bytes, std::span<const FieldName> names);

  bool done() const { return p_ >= end_; }
  // Reads the next field; skips groups. Errors for truncation, bad tags, bad
  // lengths.
  Status Next(Field* field);

  // Called for a field number the message does not know: skipped, or an
  // error in strict mode.
  Status Unknown(const Field& f) const;

  Result<std::string_view> Bytes(const Field& f) const;
  Result<std::string> String(const Field& f) const;
  Result<uint64_t> Varint(const Field& f) const;
  Result<int64_t> Int64(const Field& f) const;
  Result<int32_t> Int32(const Field& f) const;
  Result<float> Float(const Field& f) const;
  // A sub-message's bytes (wire type kLen).
  Result<ByteRange> Message(const Field& f) const;

  // Repeated scalar fields, packed or not. The payload is validated.
  Status AppendInt64s(const Field& f, std::vector<int64_t>* out) const;
  Status AppendFloats(const Field& f, std::vector<float>* out) const;
  // The same, and then the elements of an unpacked repeated field that follow f directly under the same tag
  // (as protobuf writes them), appended without a Next each; a run stops at the first other field, or at an
  // element that does not decode, which Next then reads and reports as it would have. ONNX attributes are
  // unpacked (proto2): a 500-tree ensemble's node lists are ~2.8 million fields, and a Next each took a
  // quarter of its session creation (72 -> 55 ms). AppendStringRun: repeated strings (f's payload the first).
  Status AppendInt64Run(const Field& f, std::vector<int64_t>* out);
  Status AppendFloatRun(const Field& f, std::vector<float>* out);
  Status AppendStringRun(const Field& f, std::vector<std::string>* out);

  Status Error(const std::string& what, const Field& f) const;
  const char* NameOf(uint32_t number) const;
  Decoder& decoder() const { return d_; }

 private:
  Status ExpectWireType(const Field& f, WireType expected) const;
  // Moves past the next field's tag when its bytes are `tag` (a run's tag, as TagBytes encodes it).
  bool TakeTag(const uint8_t* tag, size_t n);
  template <typename Take>
  void TakeRun(uint32_t number, WireType wire, Take&& take);
  Status SkipGroup(uint32_t number, size_t offset, int depth);
  Result<uint64_t> ReadVarint(const char* what_field);
  Status VarintError(const char* what_field) const;
  std::string FieldLabel(uint32_t number) const;

  Decoder& d_;
  const uint8_t* p_;
  const uint8_t* end_;
  std::span<const FieldName> names_;
};

// Decodes varints from a packed run; Next fails on a truncated or overlong one.
class PackedVarints {
 public:
  explicit PackedVarints(ByteRange r) : p_(r.data), end_(r.data + r.size) {}
  bool done() const { return p_ >= end_; }
  // false on a malformed varint.
  bool Next(uint64_t* value);
  // Number of varints in the run; -1 when malformed.
  static int64_t Count(ByteRange r);

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// Decodes a varint at [p, end); returns bytes consumed, 0 when truncated or
// longer than 10 bytes / overflowing 64 bits.
size_t DecodeVarint(const uint8_t* p, const uint8_t* end, uint64_t* value);

}  // namespace nee::format
