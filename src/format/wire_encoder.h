// Protobuf wire-format encoding: appends fields to a byte string. Used by the
// ONNX writer and by tests that hand-craft (also malformed) messages.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace nee::format {

class ProtoEncoder {
 public:
  // Wire types (protobuf encoding spec).
  static constexpr uint32_t kVarint = 0, kFixed64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4,
                            kFixed32 = 5;

  std::string& bytes() { return out_; }
  const std::string& bytes() const { return out_; }
  std::string Take() { return std::move(out_); }
  size_t size() const { return out_.size(); }

  void RawVarint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void Tag(uint32_t field, uint32_t wire_type) { RawVarint((static_cast<uint64_t>(field) << 3) | wire_type); }

  void Varint(uint32_t field, uint64_t v) {
    Tag(field, kVarint);
    RawVarint(v);
  }
  // int32/int64/enum fields: negative values are sign-extended to 10 bytes.
  void Int64(uint32_t field, int64_t v) { Varint(field, static_cast<uint64_t>(v)); }
  void Fixed32(uint32_t field, uint32_t bits) {
    Tag(field, kFixed32);
    RawFixed(&bits, 4);
  }
  void Fixed64(uint32_t field, uint64_t bits) {
    Tag(field, kFixed64);
    RawFixed(&bits, 8);
  }
  void Float(uint32_t field, float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    Fixed32(field, bits);
  }
  void Bytes(uint32_t field, std::string_view data) {
    Tag(field, kLen);
    RawVarint(data.size());
    out_.append(data.data(), data.size());
  }
  // A length-delimited field whose payload is written by the caller after:
  // the length must be known up front.
  void LenHeader(uint32_t field, uint64_t length) {
    Tag(field, kLen);
    RawVarint(length);
  }
  void Append(std::string_view data) { out_.append(data.data(), data.size()); }
  void RawFixed(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }

  static size_t VarintSize(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
      v >>= 7;
      ++n;
    }
    return n;
  }

 private:
  std::string out_;
};

}  // namespace nee::format
