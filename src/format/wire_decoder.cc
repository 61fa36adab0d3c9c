#include "format/wire_decoder.h"

#include <cstring>

namespace nee::format {

const char* WireTypeName(WireType type) {
  switch (type) {
    case WireType::kVarint: return "varint";
    case WireType::kFixed64: return "fixed64";
    case WireType::kLen: return "length-delimited";
    case WireType::kStartGroup: return "start-group";
    case WireType::kEndGroup: return "end-group";
    case WireType::kFixed32: return "fixed32";
  }
  return "invalid";
}

size_t DecodeVarint(const uint8_t* p, const uint8_t* end, uint64_t* value) {
  uint64_t result = 0;
  for (size_t i = 0; i < 10; ++i) {
    if (p + i >= end) return 0;
    uint8_t byte = p[i];
    // The tenth byte may only contribute the 64th bit.
    if (i == 9 && byte > 1) return 0;
    result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      *value = result;
      return i + 1;
    }
  }
  return 0;
}

bool PackedVarints::Next(uint64_t* value) {
  size_t n = DecodeVarint(p_, end_, value);
  if (n == 0) return false;
  p_ += n;
  return true;
}

int64_t PackedVarints::Count(ByteRange r) {
  PackedVarints it(r);
  int64_t count = 0;
  uint64_t v;
  while (!it.done()) {
    if (!it.Next(&v)) return -1;
    ++count;
  }
  return count;
}

Decoder::Decoder(const uint8_t* begin, size_t size, int max_depth, std::string root_name)
    : begin_(begin), size_(size), max_depth_(max_depth), root_name_(std::move(root_name)) {}

std::string Decoder::Path(const char* field, int64_t index) const {
  std::string s;
  auto append = [&s](const char* name, int64_t idx) {
    if (!s.empty()) s += '.';
    s += name;
    if (idx >= 0) s += "[" + std::to_string(idx) + "]";
  };
  for (const PathEntry& e : path_) append(e.name, e.index);
  if (field) append(field, index);
  return s.empty() ? root_name_ : s;
}

Status Decoder::Error(const std::string& what, size_t offset, const char* field,
                      int64_t index) const {
  return InvalidModel(what + " at " + Path(field, index) + " (byte offset " +
                      std::to_string(offset) + ")");
}

Status Decoder::Enter(const char* name, int64_t index, size_t offset) {
  if (static_cast<int>(path_.size()) >= max_depth_)
    return Error("messages nested deeper than " + std::to_string(max_depth_) + " levels", offset,
                 name, index);
  path_.push_back({name, index});
  return Status::Ok();
}

MessageReader::MessageReader(Decoder& d, ByteRange bytes, std::span<const FieldName> names)
    : d_(d), p_(bytes.data), end_(bytes.data + bytes.size), names_(names) {}

const char* MessageReader::NameOf(uint32_t number) const {
  for (const FieldName& n : names_)
    if (n.number == number) return n.name;
  return nullptr;
}

std::string MessageReader::FieldLabel(uint32_t number) const {
  const char* name = NameOf(number);
  return name ? name : "field " + std::to_string(number);
}

Status MessageReader::Error(const std::string& what, const Field& f) const {
  return d_.Error(what, f.offset, FieldLabel(f.number).c_str());
}

Status MessageReader::VarintError(const char* what_field) const {
  // Fewer than 10 bytes left means decoding ran off the end.
  bool truncated = (end_ - p_) < 10;
  return d_.Error(truncated ? "truncated varint" : "malformed varint (over 64 bits)", d_.OffsetOf(p_),
                  what_field);
}

Result<uint64_t> MessageReader::ReadVarint(const char* what_field) {
  uint64_t v = 0;
  size_t n = DecodeVarint(p_, end_, &v);
  if (n == 0) return VarintError(what_field);
  p_ += n;
  return v;
}

// Runs for every field of the file, so a field's name is looked up only to
// report an error.
Status MessageReader::Next(Field* f) {
  const uint8_t* tag_start = p_;
  f->offset = d_.OffsetOf(tag_start);
  uint64_t tag = 0;
  {
    size_t n = DecodeVarint(p_, end_, &tag);
    if (n == 0) return d_.Error("truncated or malformed field tag", f->offset);
    p_ += n;
  }
  uint64_t number = tag >> 3;
  uint32_t wire = static_cast<uint32_t>(tag & 7);
  if (number == 0 || number > 0x1fffffff)
    return d_.Error("invalid field number " + std::to_string(number), f->offset);
  f->number = static_cast<uint32_t>(number);
  if (wire > 5) return Error("invalid wire type " + std::to_string(wire), *f);
  f->wire_type = static_cast<WireType>(wire);

  switch (f->wire_type) {
    case WireType::kVarint: {
      const uint8_t* value_start = p_;
      size_t n = DecodeVarint(p_, end_, &f->scalar);
      if (n == 0) return VarintError(FieldLabel(f->number).c_str());
      p_ += n;
      f->payload = {value_start, n};
      return Status::Ok();
    }
    case WireType::kFixed32:
    case WireType::kFixed64: {
      size_t width = f->wire_type == WireType::kFixed32 ? 4 : 8;
      if (static_cast<size_t>(end_ - p_) < width)
        return Error(std::string("truncated ") + WireTypeName(f->wire_type) + " field", *f);
      uint64_t bits = 0;
      std::memcpy(&bits, p_, width);  // little-endian host assumed (x86-64, aarch64)
      f->scalar = bits;
      f->payload = {p_, width};
      p_ += width;
      return Status::Ok();
    }
    case WireType::kLen: {
      uint64_t len = 0;
      size_t n = DecodeVarint(p_, end_, &len);
      if (n == 0) return VarintError(FieldLabel(f->number).c_str());
      p_ += n;
      if (len > static_cast<uint64_t>(end_ - p_))
        return Error("truncated length-delimited field (length " + std::to_string(len) + ", " +
                         std::to_string(end_ - p_) + " bytes left)",
                     *f);
      f->payload = {p_, static_cast<size_t>(len)};
      p_ += len;
      return Status::Ok();
    }
    case WireType::kStartGroup: {
      const uint8_t* group_start = p_;
      NEE_RETURN_IF_ERROR(SkipGroup(f->number, f->offset, d_.depth() + 1));
      // p_ now points past the end-group tag; the payload excludes it only
      // approximately, but groups are never decoded, only skipped.
      f->payload = {group_start, static_cast<size_t>(p_ - group_start)};
      return Status::Ok();
    }
    case WireType::kEndGroup:
      return Error("unexpected end-group tag", *f);
  }
  return Error("invalid wire type", *f);
}

// Skips fields up to and including the end-group tag matching `number`.
Status MessageReader::SkipGroup(uint32_t number, size_t offset, int depth) {
  if (depth > 100) return d_.Error("groups nested too deeply", offset);
  while (true) {
    if (p_ >= end_) return d_.Error("unterminated group", offset);
    size_t tag_offset = d_.OffsetOf(p_);
    uint64_t tag = 0;
    size_t n = DecodeVarint(p_, end_, &tag);
    if (n == 0) return d_.Error("truncated or malformed field tag in group", tag_offset);
    p_ += n;
    uint64_t inner_number = tag >> 3;
    uint32_t wire = static_cast<uint32_t>(tag & 7);
    if (inner_number == 0 || inner_number > 0x1fffffff)
      return d_.Error("invalid field number in group", tag_offset);
    switch (wire) {
      case 0: {
        NEE_ASSIGN_OR_RETURN(uint64_t ignored, ReadVarint("group"));
        (void)ignored;
        break;
      }
      case 1:
      case 5: {
        size_t width = wire == 5 ? 4 : 8;
        if (static_cast<size_t>(end_ - p_) < width)
          return d_.Error("truncated fixed-width field in group", tag_offset);
        p_ += width;
        break;
      }
      case 2: {
        NEE_ASSIGN_OR_RETURN(uint64_t len, ReadVarint("group"));
        if (len > static_cast<uint64_t>(end_ - p_))
          return d_.Error("truncated length-delimited field in group", tag_offset);
        p_ += len;
        break;
      }
      case 3:
        NEE_RETURN_IF_ERROR(SkipGroup(static_cast<uint32_t>(inner_number), tag_offset, depth + 1));
        break;
      case 4:
        if (inner_number != number)
          return d_.Error("mismatched end-group tag", tag_offset);
        return Status::Ok();
      default:
        return d_.Error("invalid wire type " + std::to_string(wire) + " in group", tag_offset);
    }
  }
}

Status MessageReader::Unknown(const Field& f) const {
  if (d_.strict()) return Error("unexpected field", f);
  return Status::Ok();
}

Status MessageReader::ExpectWireType(const Field& f, WireType expected) const {
  if (f.wire_type == expected) return Status::Ok();
  return Error(std::string("wire type ") + WireTypeName(f.wire_type) + " where " +
                   WireTypeName(expected) + " was expected",
               f);
}

Result<std::string_view> MessageReader::Bytes(const Field& f) const {
  NEE_RETURN_IF_ERROR(ExpectWireType(f, WireType::kLen));
  return f.payload.view();
}

Result<std::string> MessageReader::String(const Field& f) const {
  NEE_RETURN_IF_ERROR(ExpectWireType(f, WireType::kLen));
  return std::string(f.payload.view());
}

Result<uint64_t> MessageReader::Varint(const Field& f) const {
  NEE_RETURN_IF_ERROR(ExpectWireType(f, WireType::kVarint));
  return f.scalar;
}

Result<int64_t> MessageReader::Int64(const Field& f) const {
  NEE_RETURN_IF_ERROR(ExpectWireType(f, WireType::kVarint));
  return static_cast<int64_t>(f.scalar);
}

Result<int32_t> MessageReader::Int32(const Field& f) const {
  NEE_RETURN_IF_ERROR(ExpectWireType(f, WireType::kVarint));
  // protobuf truncates a 64-bit varint to the field's 32 bits.
  return static_cast<int32_t>(static_cast<uint32_t>(f.scalar));
}

Result<float> MessageReader::Float(const Field& f) const {
  NEE_RETURN_IF_ERROR(ExpectWireType(f, WireType::kFixed32));
  uint32_t bits = static_cast<uint32_t>(f.scalar);
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

Result<ByteRange> MessageReader::Message(const Field& f) const {
  NEE_RETURN_IF_ERROR(ExpectWireType(f, WireType::kLen));
  return f.payload;
}

Status MessageReader::AppendInt64s(const Field& f, std::vector<int64_t>* out) const {
  if (f.wire_type == WireType::kVarint) {
    out->push_back(static_cast<int64_t>(f.scalar));
    return Status::Ok();
  }
  NEE_RETURN_IF_ERROR(ExpectWireType(f, WireType::kLen));
  int64_t count = PackedVarints::Count(f.payload);
  if (count < 0) return Error("malformed packed varint", f);
  out->reserve(out->size() + static_cast<size_t>(count));
  PackedVarints it(f.payload);
  uint64_t v;
  while (it.Next(&v)) out->push_back(static_cast<int64_t>(v));
  return Status::Ok();
}

namespace {
// A field's tag as the wire encodes it (canonically: a writer that pads a tag with extra varint bytes just
// takes the general path).
size_t TagBytes(uint32_t number, WireType wire, uint8_t out[5]) {
  uint64_t tag = (static_cast<uint64_t>(number) << 3) | static_cast<uint64_t>(wire);
  size_t n = 0;
  do {
    const uint8_t low = static_cast<uint8_t>(tag & 0x7f);
    tag >>= 7;
    out[n++] = tag ? static_cast<uint8_t>(low | 0x80) : low;
  } while (tag != 0);
  return n;
}
}  // namespace

// Byte by byte: a tag is one to five bytes, and a run of unpacked repeated
// values (a scikit-learn forest's node attributes, 200,000 elements and more)
// checks one per element, where a call to memcmp cost more than the compare.
bool MessageReader::TakeTag(const uint8_t* tag, size_t n) {
  if (static_cast<size_t>(end_ - p_) <= n) return false;
  for (size_t i = 0; i < n; ++i)
    if (p_[i] != tag[i]) return false;
  p_ += n;
  return true;
}

// After an element of a run (already appended), the elements that follow it under the same tag: `take(p)`
// appends the value at p and returns the bytes it took, or 0 when it does not decode, which ends the run
// there, before that element's tag, for Next to read and report.
template <typename Take>
void MessageReader::TakeRun(uint32_t number, WireType wire, Take&& take) {
  uint8_t tag[5];
  const size_t tag_size = TagBytes(number, wire, tag);
  for (const uint8_t* start = p_; TakeTag(tag, tag_size); start = p_) {
    const size_t n = take(p_);
    if (n == 0) {
      p_ = start;
      return;
    }
    p_ += n;
  }
}

Status MessageReader::AppendInt64Run(const Field& f, std::vector<int64_t>* out) {
  NEE_RETURN_IF_ERROR(AppendInt64s(f, out));
  if (f.wire_type != WireType::kVarint) return Status::Ok();
  TakeRun(f.number, WireType::kVarint, [&](const uint8_t* p) {
    uint64_t v = 0;
    const size_t n = DecodeVarint(p, end_, &v);
    if (n != 0) out->push_back(static_cast<int64_t>(v));
    return n;
  });
  return Status::Ok();
}

Status MessageReader::AppendFloatRun(const Field& f, std::vector<float>* out) {
  NEE_RETURN_IF_ERROR(AppendFloats(f, out));
  if (f.wire_type != WireType::kFixed32) return Status::Ok();
  TakeRun(f.number, WireType::kFixed32, [&](const uint8_t* p) -> size_t {
    if (end_ - p < 4) return 0;
    float v;
    std::memcpy(&v, p, 4);
    out->push_back(v);
    return 4;
  });
  return Status::Ok();
}

Status MessageReader::AppendStringRun(const Field& f, std::vector<std::string>* out) {
  NEE_ASSIGN_OR_RETURN(std::string first, String(f));
  out->push_back(std::move(first));
  TakeRun(f.number, WireType::kLen, [&](const uint8_t* p) -> size_t {
    uint64_t len = 0;
    const size_t n = DecodeVarint(p, end_, &len);
    if (n == 0 || len > static_cast<uint64_t>(end_ - p) - n) return 0;
    out->emplace_back(reinterpret_cast<const char*>(p + n), static_cast<size_t>(len));
    return n + static_cast<size_t>(len);
  });
  return Status::Ok();
}

Status MessageReader::AppendFloats(const Field& f, std::vector<float>* out) const {
  if (f.wire_type == WireType::kFixed32) {
    NEE_ASSIGN_OR_RETURN(float v, Float(f));
    out->push_back(v);
    return Status::Ok();
  }
  NEE_RETURN_IF_ERROR(ExpectWireType(f, WireType::kLen));
  if (f.payload.size % 4 != 0) return Error("packed float field size is not a multiple of 4", f);
  size_t n = f.payload.size / 4;
  size_t old = out->size();
  out->resize(old + n);
  if (n) std::memcpy(out->data() + old, f.payload.data, n * 4);
  return Status::Ok();
}

}  // namespace nee::format
