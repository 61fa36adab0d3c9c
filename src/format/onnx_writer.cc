#include "format/onnx_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "format/external_data.h"
#include "ir/value.h"
#include "format/wire_encoder.h"

namespace nee {

using format::ProtoEncoder;

namespace {

// Field number of the padding inserted before raw_data when aligning tensor
// bytes: the largest legal field number, which ONNX will not use; readers
// (protobuf, onnx, onnxruntime, nee) skip it as an unknown field.
constexpr uint32_t kPadField = 0x1fffffff;
constexpr uint64_t kTensorAlignment = 64;
// Smallest padding field: 5-byte tag + 1-byte length + empty payload.
constexpr uint64_t kMinPad = 6;

// A message under construction: scalar fields are encoded at once; tensor
// bytes are borrowed (not copied) and nested messages are kept as children,
// so lengths are known only when the whole tree is done. Flattening then
// copies each tensor byte exactly once, into the output string or file.
class MessageBuilder {
 public:
  ProtoEncoder& enc() {
    if (pieces_.empty() || pieces_.back().kind != Piece::kOwned) pieces_.emplace_back(Piece::kOwned);
    return pieces_.back().owned;
  }
  // A length-delimited field whose payload stays where it is. With `align`,
  // a padding field goes before it, sized by Layout() so that the payload
  // starts at a multiple of kTensorAlignment in the output.
  void BorrowedBytes(uint32_t field, const void* data, size_t size, bool align = false) {
    if (align) pieces_.emplace_back(Piece::kPad);
    enc().LenHeader(field, size);
    Piece p(Piece::kBorrowed);
    p.data = static_cast<const char*>(data);
    p.size = size;
    p.align = align;
    pieces_.push_back(std::move(p));
  }
  MessageBuilder& Child(uint32_t field) {
    Piece p(Piece::kChild);
    p.field = field;
    p.child = std::make_unique<MessageBuilder>();
    pieces_.push_back(std::move(p));
    return *pieces_.back().child;
  }

  // Recomputes and caches the encoded size of this message and its children.
  uint64_t ComputeSize() {
    uint64_t total = 0;
    for (Piece& p : pieces_) {
      switch (p.kind) {
        case Piece::kOwned: total += p.owned.size(); break;
        case Piece::kPad: total += p.size; break;
        case Piece::kBorrowed: total += p.size; break;
        case Piece::kChild: total += ChildHeaderSize(p.field, p.child->ComputeSize()) + p.child->size_; break;
      }
    }
    size_ = total;
    sized_ = true;
    return total;
  }
  uint64_t Size() {
    if (!sized_) {
      ComputeSize();
      sized_ = true;
    }
    return size_;
  }

  // Sizes the padding pieces so aligned payloads start on kTensorAlignment.
  // Padding changes message lengths (and so their varint sizes), which moves
  // later payloads: repeat until nothing changes. Not converging only costs
  // alignment (the reader then copies), never correctness.
  void AlignPayloads() {
    ComputeSize();
    for (int pass = 0; pass < 16; ++pass)
      if (!Layout(0)) return;
  }

  // Calls sink(data, size) for each run of output bytes, in order.
  template <typename Sink>
  bool Emit(Sink& sink) {
    Size();
    for (const Piece& p : pieces_) {
      switch (p.kind) {
        case Piece::kOwned:
          if (!sink(p.owned.bytes().data(), p.owned.size())) return false;
          break;
        case Piece::kPad:
          if (p.size > 0) {
            ProtoEncoder pad;
            pad.LenHeader(kPadField, p.size - kMinPad);
            pad.Append(std::string(p.size - kMinPad, '\0'));
            if (!sink(pad.bytes().data(), pad.size())) return false;
          }
          break;
        case Piece::kBorrowed:
          if (p.size > 0 && !sink(p.data, p.size)) return false;
          break;
        case Piece::kChild: {
          ProtoEncoder header;
          header.LenHeader(p.field, p.child->size_);
          if (!sink(header.bytes().data(), header.size())) return false;
          if (!p.child->Emit(sink)) return false;
          break;
        }
      }
    }
    return true;
  }

 private:
  struct Piece {
    enum Kind { kOwned, kPad, kBorrowed, kChild };
    explicit Piece(Kind k) : kind(k) {}
    Kind kind;
    ProtoEncoder owned;
    const char* data = nullptr;
    size_t size = 0;  // borrowed bytes, or the padding field's total size (0 or kMinPad..kMinPad+63)
    bool align = false;
    uint32_t field = 0;
    std::unique_ptr<MessageBuilder> child;
  };

  static uint64_t ChildHeaderSize(uint32_t field, uint64_t child_size) {
    return ProtoEncoder::VarintSize((static_cast<uint64_t>(field) << 3) | 2) + ProtoEncoder::VarintSize(child_size);
  }

  // Walks the pieces from absolute `offset`, adjusting padding where an
  // aligned payload is off, and updates the cached sizes on the way so later
  // pieces see exact offsets. Returns whether anything changed; a child whose
  // length varint changed size was laid out from a stale header and needs
  // another pass.
  bool Layout(uint64_t offset) {
    const uint64_t start = offset;
    bool changed = false;
    Piece* pad = nullptr;
    for (Piece& p : pieces_) {
      switch (p.kind) {
        case Piece::kOwned: offset += p.owned.size(); break;
        case Piece::kPad:
          pad = &p;
          offset += p.size;
          break;
        case Piece::kBorrowed:
          if (p.align && pad && p.size > 0 && offset % kTensorAlignment != 0) {
            // The padding size with the residue that lands the payload on a boundary.
            uint64_t residue = (pad->size + kTensorAlignment - offset % kTensorAlignment) % kTensorAlignment;
            uint64_t wanted = residue == 0 ? 0 : residue >= kMinPad ? residue : residue + kTensorAlignment;
            offset = offset - pad->size + wanted;
            pad->size = wanted;
            changed = true;
          }
          pad = nullptr;
          offset += p.size;
          break;
        case Piece::kChild: {
          uint64_t header = ChildHeaderSize(p.field, p.child->size_);
          changed = p.child->Layout(offset + header) || changed;
          uint64_t new_header = ChildHeaderSize(p.field, p.child->size_);
          if (new_header != header) changed = true;
          offset += new_header + p.child->size_;
          break;
        }
      }
    }
    size_ = offset - start;
    sized_ = true;
    return changed;
  }

  std::vector<Piece> pieces_;
  uint64_t size_ = 0;
  bool sized_ = false;
};

constexpr uint64_t kExternalAlignment = 4096;

// Where initializers above the threshold go when writing a file.
struct ExternalPlan {
  int64_t threshold = -1;
  std::string location;
  struct Entry {
    const Tensor* tensor;
    uint64_t offset;
  };
  std::vector<Entry> entries;
  uint64_t end = 0;
};

class OnnxWriter {
 public:
  OnnxWriter(ExternalPlan* external, bool align) : external_(external), align_(align) {}

  Status Model(const nee::Model& m, MessageBuilder& b);
  Status Tensor(const nee::Tensor& t, const std::string& name, const std::string& doc, bool may_externalize,
                MessageBuilder& b);

 private:
  Status Graph(const nee::Graph& g, MessageBuilder& b);
  Status Node(const nee::Node& n, MessageBuilder& b);
  Status Attribute(const nee::Attribute& a, const nee::Node* node, MessageBuilder& b);
  void ValueInfo(const nee::ValueInfo& v, MessageBuilder& b);
  void Type(const TypeInfo& t, MessageBuilder& b);
  Status Function(const nee::Function& f, MessageBuilder& b);
  Status Sparse(const SparseTensor& s, MessageBuilder& b);
  static void Entry(const std::pair<std::string, std::string>& e, MessageBuilder& b) {
    b.enc().Bytes(1, e.first);
    b.enc().Bytes(2, e.second);
  }
  static void Opset(const OpsetImport& o, MessageBuilder& b) {
    b.enc().Bytes(1, o.domain);
    b.enc().Int64(2, o.version);
  }
  static void OptionalString(MessageBuilder& b, uint32_t field, const std::string& s) {
    if (!s.empty()) b.enc().Bytes(field, s);
  }

  ExternalPlan* external_;
  bool align_;
};

Status OnnxWriter::Model(const nee::Model& m, MessageBuilder& b) {
  if (m.ir_version != 0) b.enc().Int64(1, m.ir_version);
  OptionalString(b, 2, m.producer_name);
  OptionalString(b, 3, m.producer_version);
  OptionalString(b, 4, m.domain);
  if (m.model_version != 0) b.enc().Int64(5, m.model_version);
  OptionalString(b, 6, m.doc_string);
  NEE_RETURN_IF_ERROR(Graph(m.graph, b.Child(7)));
  for (const OpsetImport& o : m.opset_imports) Opset(o, b.Child(8));
  for (const auto& e : m.metadata_props) Entry(e, b.Child(14));
  for (const nee::Function& f : m.functions) NEE_RETURN_IF_ERROR(Function(f, b.Child(25)));
  return Status::Ok();
}

Status OnnxWriter::Graph(const nee::Graph& g, MessageBuilder& b) {
  for (const nee::Node& n : g.nodes) NEE_RETURN_IF_ERROR(Node(n, b.Child(1)));
  OptionalString(b, 2, g.name);
  for (const Initializer& init : g.initializers)
    NEE_RETURN_IF_ERROR(Tensor(init.tensor, init.name, init.doc_string, true, b.Child(5))
                            .WithContext("initializer '" + init.name + "': "));
  OptionalString(b, 10, g.doc_string);
  for (const nee::ValueInfo& v : g.inputs) ValueInfo(v, b.Child(11));
  for (const nee::ValueInfo& v : g.outputs) ValueInfo(v, b.Child(12));
  for (const nee::ValueInfo& v : g.value_info) ValueInfo(v, b.Child(13));
  for (const SparseTensor& s : g.sparse_initializers) NEE_RETURN_IF_ERROR(Sparse(s, b.Child(15)));
  for (const auto& e : g.metadata_props) Entry(e, b.Child(16));
  return Status::Ok();
}

Status OnnxWriter::Node(const nee::Node& n, MessageBuilder& b) {
  for (const std::string& s : n.inputs) b.enc().Bytes(1, s);
  for (const std::string& s : n.outputs) b.enc().Bytes(2, s);
  OptionalString(b, 3, n.name);
  b.enc().Bytes(4, n.op_type);
  for (const nee::Attribute& a : n.attributes) NEE_RETURN_IF_ERROR(Attribute(a, &n, b.Child(5)));
  OptionalString(b, 6, n.doc_string);
  OptionalString(b, 7, n.domain);
  OptionalString(b, 8, n.overload);
  return Status::Ok();
}

Status OnnxWriter::Attribute(const nee::Attribute& a, const nee::Node* node, MessageBuilder& b) {
  std::string who = (node ? node->Describe() + " " : std::string()) + "attribute '" + a.name + "': ";
  b.enc().Bytes(1, a.name);
  // A reference to the calling node's attribute carries no value.
  bool has_value = a.ref_attr_name.empty();
  if (has_value) {
    switch (a.type) {
      case AttrType::kFloat: b.enc().Float(2, a.f); break;
      case AttrType::kInt: b.enc().Int64(3, a.i); break;
      case AttrType::kString: b.enc().Bytes(4, a.s); break;
      case AttrType::kTensor: NEE_RETURN_IF_ERROR(Tensor(a.t, "", "", false, b.Child(5)).WithContext(who)); break;
      case AttrType::kGraph:
        if (!a.g) return InvalidArgument(who + "graph attribute without a graph");
        NEE_RETURN_IF_ERROR(Graph(*a.g, b.Child(6)));
        break;
      case AttrType::kFloats:
        for (float f : a.floats) b.enc().Float(7, f);
        break;
      case AttrType::kInts:
        for (int64_t i : a.ints) b.enc().Int64(8, i);
        break;
      case AttrType::kStrings:
        for (const std::string& s : a.strings) b.enc().Bytes(9, s);
        break;
      case AttrType::kTensors:
        for (const nee::Tensor& t : a.tensors) NEE_RETURN_IF_ERROR(Tensor(t, "", "", false, b.Child(10)).WithContext(who));
        break;
      case AttrType::kGraphs:
        for (const auto& g : a.graphs) {
          if (!g) return InvalidArgument(who + "null graph in a graphs attribute");
          NEE_RETURN_IF_ERROR(Graph(*g, b.Child(11)));
        }
        break;
      default: break;  // the remaining kinds have larger field numbers, written below
    }
  }
  OptionalString(b, 13, a.doc_string);
  if (has_value) {
    if (a.type == AttrType::kTypeProto) Type(a.tp, b.Child(14));
    if (a.type == AttrType::kTypeProtos)
      for (const TypeInfo& t : a.type_protos) Type(t, b.Child(15));
  }
  if (a.type == AttrType::kUndefined) return InvalidArgument(who + "attribute has no type");
  b.enc().Varint(20, static_cast<uint64_t>(a.type));
  OptionalString(b, 21, a.ref_attr_name);
  if (has_value) {
    if (a.type == AttrType::kSparseTensor) NEE_RETURN_IF_ERROR(Sparse(a.sparse_tensor, b.Child(22)).WithContext(who));
    if (a.type == AttrType::kSparseTensors)
      for (const SparseTensor& s : a.sparse_tensors) NEE_RETURN_IF_ERROR(Sparse(s, b.Child(23)).WithContext(who));
  }
  return Status::Ok();
}

void OnnxWriter::ValueInfo(const nee::ValueInfo& v, MessageBuilder& b) {
  b.enc().Bytes(1, v.name);
  if (v.type.kind != TypeInfo::Kind::kUnknown || !v.type.denotation.empty()) Type(v.type, b.Child(2));
  OptionalString(b, 3, v.doc_string);
  for (const auto& e : v.metadata_props) Entry(e, b.Child(4));
}

void OnnxWriter::Type(const TypeInfo& t, MessageBuilder& b) {
  auto tensor_like = [&t](MessageBuilder& tb) {
    if (t.elem_type != DataType::kUndefined) tb.enc().Varint(1, static_cast<uint64_t>(t.elem_type));
    if (t.shape) {
      MessageBuilder& shape = tb.Child(2);
      for (const Dim& d : *t.shape) {
        MessageBuilder& dim = shape.Child(1);
        if (d.known()) {
          dim.enc().Int64(1, d.value);
        } else if (!d.symbol.empty()) {
          dim.enc().Bytes(2, d.symbol);
        }
        if (!d.denotation.empty()) dim.enc().Bytes(3, d.denotation);
      }
    }
  };
  static const TypeInfo kUnknown;
  const TypeInfo& inner = t.inner ? *t.inner : kUnknown;
  // Fields in number order, as protobuf writes them: tensor_type (1),
  // sequence_type (4), map_type (5), denotation (6), sparse (8), optional (9).
  switch (t.kind) {
    case TypeInfo::Kind::kTensor: tensor_like(b.Child(1)); break;
    case TypeInfo::Kind::kSequence: {
      MessageBuilder& seq = b.Child(4);
      if (t.inner) Type(inner, seq.Child(1));
      break;
    }
    case TypeInfo::Kind::kMap: {
      MessageBuilder& map = b.Child(5);
      map.enc().Varint(1, static_cast<uint64_t>(t.elem_type));
      if (t.inner) Type(inner, map.Child(2));
      break;
    }
    default: break;
  }
  OptionalString(b, 6, t.denotation);
  if (t.kind == TypeInfo::Kind::kSparseTensor) tensor_like(b.Child(8));
  if (t.kind == TypeInfo::Kind::kOptional) {
    MessageBuilder& opt = b.Child(9);
    if (t.inner) Type(inner, opt.Child(1));
  }
}

Status OnnxWriter::Function(const nee::Function& f, MessageBuilder& b) {
  b.enc().Bytes(1, f.name);
  for (const std::string& s : f.inputs) b.enc().Bytes(4, s);
  for (const std::string& s : f.outputs) b.enc().Bytes(5, s);
  for (const std::string& s : f.attribute_names) b.enc().Bytes(6, s);
  for (const nee::Node& n : f.nodes) NEE_RETURN_IF_ERROR(Node(n, b.Child(7)));
  OptionalString(b, 8, f.doc_string);
  for (const OpsetImport& o : f.opset_imports) Opset(o, b.Child(9));
  OptionalString(b, 10, f.domain);
  for (const nee::Attribute& a : f.attribute_defaults) NEE_RETURN_IF_ERROR(Attribute(a, nullptr, b.Child(11)));
  for (const nee::ValueInfo& v : f.value_info) ValueInfo(v, b.Child(12));
  OptionalString(b, 13, f.overload);
  for (const auto& e : f.metadata_props) Entry(e, b.Child(14));
  return Status::Ok();
}

Status OnnxWriter::Sparse(const SparseTensor& s, MessageBuilder& b) {
  NEE_RETURN_IF_ERROR(Tensor(s.values, s.name, "", false, b.Child(1)));
  NEE_RETURN_IF_ERROR(Tensor(s.indices, "", "", false, b.Child(2)));
  for (int64_t d : s.dims) b.enc().Int64(3, d);
  return Status::Ok();
}

Status OnnxWriter::Tensor(const nee::Tensor& t, const std::string& name, const std::string& doc,
                          bool may_externalize, MessageBuilder& b) {
  if (!t.defined()) return InvalidArgument("tensor '" + name + "' has no element type");
  for (int64_t d : t.dims()) b.enc().Int64(1, d);
  b.enc().Varint(2, static_cast<uint64_t>(t.dtype()));
  if (t.dtype() == DataType::kString) {
    for (const std::string& s : t.span<std::string>()) b.enc().Bytes(6, s);
  }
  OptionalString(b, 8, name);
  bool external = may_externalize && external_ && external_->threshold >= 0 && t.dtype() != DataType::kString &&
                  static_cast<int64_t>(t.byte_size()) > external_->threshold;
  if (t.dtype() != DataType::kString && !external) {
    // Aligning pays for multi-byte elements (the reader can then view them
    // in place) and for larger byte tensors (SIMD-friendly); tiny byte
    // tensors are not worth the padding.
    bool align = align_ && t.byte_size() > 0 && (ElementBits(t.dtype()) >= 16 || t.byte_size() >= 64);
    b.BorrowedBytes(9, t.raw_data(), t.byte_size(), align);
  }
  OptionalString(b, 12, doc);
  if (external) {
    uint64_t offset = (external_->end + kExternalAlignment - 1) / kExternalAlignment * kExternalAlignment;
    external_->entries.push_back({&t, offset});
    external_->end = offset + t.byte_size();
    Entry({"location", external_->location}, b.Child(13));
    Entry({"offset", std::to_string(offset)}, b.Child(13));
    Entry({"length", std::to_string(t.byte_size())}, b.Child(13));
    b.enc().Varint(14, 1);  // data_location = EXTERNAL
  }
  return Status::Ok();
}

// Writes to `path` through a temporary file renamed into place.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path) : path_(std::move(path)), temp_(path_ + ".tmp-nee") {}
  ~AtomicFile() {
    if (file_) {
      std::fclose(file_);
      std::remove(temp_.c_str());
    }
  }
  Status Open() {
    file_ = std::fopen(temp_.c_str(), "wb");
    if (!file_) return IoError("cannot create '" + temp_ + "': " + std::strerror(errno));
    return Status::Ok();
  }
  bool Write(const void* data, size_t size) {
    return size == 0 || std::fwrite(data, 1, size, file_) == size;
  }
  bool Pad(uint64_t count) {
    static const char kZeros[4096] = {};
    while (count > 0) {
      size_t n = count > sizeof(kZeros) ? sizeof(kZeros) : static_cast<size_t>(count);
      if (!Write(kZeros, n)) return false;
      count -= n;
    }
    return true;
  }
  Status Commit() {
    bool ok = std::fflush(file_) == 0;
    ok = std::fclose(file_) == 0 && ok;
    file_ = nullptr;
    if (!ok) {
      std::remove(temp_.c_str());
      return IoError("cannot write '" + path_ + "'");
    }
    if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
      std::remove(temp_.c_str());
      return IoError("cannot rename '" + temp_ + "' to '" + path_ + "': " + std::strerror(errno));
    }
    return Status::Ok();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string temp_;
  FILE* file_ = nullptr;
};

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string Flatten(MessageBuilder& root) {
  std::string out;
  out.reserve(static_cast<size_t>(root.Size()));
  auto sink = [&out](const char* data, size_t size) {
    out.append(data, size);
    return true;
  };
  root.Emit(sink);
  return out;
}

// SequenceProto / OptionalProto elem_type for a value kind.
int ValueElemType(TypeInfo::Kind kind) {
  switch (kind) {
    case TypeInfo::Kind::kTensor: return 1;
    case TypeInfo::Kind::kSparseTensor: return 2;
    case TypeInfo::Kind::kSequence: return 3;
    case TypeInfo::Kind::kMap: return 4;
    case TypeInfo::Kind::kOptional: return 5;
    case TypeInfo::Kind::kUnknown: break;
  }
  return 0;
}
int ValueElemType(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kTensor: return 1;
    case Value::Kind::kSequence: return 3;
    case Value::Kind::kMap: return 4;
    case Value::Kind::kNone: return 5;
    case Value::Kind::kEmpty: break;
  }
  return 0;
}

Status WriteValue(OnnxWriter& writer, const Value& v, const std::string& name, MessageBuilder& b);

Status WriteSequence(OnnxWriter& writer, const Value& v, const std::string& name, MessageBuilder& b) {
  if (!name.empty()) b.enc().Bytes(1, name);
  int elem_type = v.elements().empty() ? ValueElemType(v.element_type().kind) : ValueElemType(v.elements()[0]);
  b.enc().Varint(2, static_cast<uint64_t>(elem_type));
  for (const Value& e : v.elements()) {
    if (ValueElemType(e) != elem_type) return InvalidArgument("sequence elements of different kinds");
    uint32_t field = e.is_tensor() ? 3 : e.is_sequence() ? 5 : e.is_map() ? 6 : 7;
    NEE_RETURN_IF_ERROR(WriteValue(writer, e, "", b.Child(field)));
  }
  return Status::Ok();
}

Status WriteMap(OnnxWriter& writer, const Value& v, const std::string& name, MessageBuilder& b) {
  const Tensor& keys = v.map_keys();
  const Tensor& values = v.map_values();
  if (keys.rank() != 1 || values.rank() < 1 || values.dim(0) != keys.num_elements())
    return InvalidArgument("map keys " + keys.Describe() + " and values " + values.Describe() + " do not pair up");
  if (!name.empty()) b.enc().Bytes(1, name);
  b.enc().Varint(2, static_cast<uint64_t>(keys.dtype()));
  if (keys.dtype() == DataType::kString) {
    for (const std::string& k : keys.span<std::string>()) b.enc().Bytes(4, k);
  } else {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> ints, keys.ToInt64Vector());
    for (int64_t k : ints) b.enc().Int64(3, k);
  }
  // values: a SequenceProto of one tensor per key (the rows of `values`).
  MessageBuilder& seq = b.Child(5);
  seq.enc().Varint(2, 1);
  std::vector<int64_t> row_dims(values.dims().begin() + 1, values.dims().end());
  NEE_ASSIGN_OR_RETURN(int64_t row_count, CheckedElementCount(row_dims));
  for (int64_t i = 0; i < keys.num_elements(); ++i) {
    NEE_ASSIGN_OR_RETURN(Tensor row, Tensor::Allocate(values.dtype(), row_dims));
    if (values.dtype() == DataType::kString) {
      for (int64_t k = 0; k < row_count; ++k) row.data<std::string>()[k] = values.data<std::string>()[i * row_count + k];
    } else if (IsSubByte(values.dtype())) {
      return NotImplemented("maps of sub-byte values");
    } else {
      size_t bytes = row.byte_size();
      std::memcpy(row.raw_data(), static_cast<const uint8_t*>(values.raw_data()) + i * bytes, bytes);
    }
    // The row tensor is owned by this builder's caller only while building:
    // serialize it now into an owned piece.
    NEE_ASSIGN_OR_RETURN(std::string encoded, SerializeTensorProto(row, ""));
    seq.enc().Bytes(3, encoded);
  }
  return Status::Ok();
}

Status WriteValue(OnnxWriter& writer, const Value& v, const std::string& name, MessageBuilder& b) {
  switch (v.kind()) {
    case Value::Kind::kTensor: return writer.Tensor(v.tensor(), name, "", false, b);
    case Value::Kind::kSequence: return WriteSequence(writer, v, name, b);
    case Value::Kind::kMap: return WriteMap(writer, v, name, b);
    case Value::Kind::kNone:
      if (!name.empty()) b.enc().Bytes(1, name);
      b.enc().Varint(2, static_cast<uint64_t>(ValueElemType(v.element_type().kind)));
      return Status::Ok();
    case Value::Kind::kEmpty: break;
  }
  return InvalidArgument("cannot serialize an empty value");
}

}  // namespace

Result<std::string> SerializeModel(const Model& model) {
  MessageBuilder root;
  OnnxWriter writer(nullptr, false);
  NEE_RETURN_IF_ERROR(writer.Model(model, root));
  return Flatten(root);
}

Result<std::string> SerializeTensorProto(const Tensor& tensor, const std::string& name) {
  MessageBuilder root;
  OnnxWriter writer(nullptr, false);
  NEE_RETURN_IF_ERROR(writer.Tensor(tensor, name, "", false, root));
  return Flatten(root);
}

Result<std::string> SerializeValueProto(const Value& value, const std::string& name) {
  MessageBuilder root;
  OnnxWriter writer(nullptr, false);
  NEE_RETURN_IF_ERROR(WriteValue(writer, value, name, root));
  return Flatten(root);
}

Status WriteModelFile(const Model& model, const std::string& path, const WriteOptions& options) {
  ExternalPlan plan;
  plan.threshold = options.external_data_threshold;
  if (plan.threshold >= 0) {
    plan.location = options.external_data_file.empty() ? BaseName(path) + ".data" : options.external_data_file;
    Status location_ok = format::CheckExternalLocation(plan.location);
    if (!location_ok.ok()) return InvalidArgument("WriteModelFile: " + location_ok.message());
  }
  MessageBuilder root;
  OnnxWriter writer(&plan, options.align_tensor_data);
  NEE_RETURN_IF_ERROR(writer.Model(model, root));
  if (options.align_tensor_data) root.AlignPayloads();

  if (!plan.entries.empty()) {
    AtomicFile data(DirName(path) + "/" + plan.location);
    NEE_RETURN_IF_ERROR(data.Open());
    uint64_t position = 0;
    for (const ExternalPlan::Entry& e : plan.entries) {
      if (!data.Pad(e.offset - position) || !data.Write(e.tensor->raw_data(), e.tensor->byte_size()))
        return IoError("cannot write '" + data.path() + "'");
      position = e.offset + e.tensor->byte_size();
    }
    NEE_RETURN_IF_ERROR(data.Commit());
  }
  AtomicFile file(path);
  NEE_RETURN_IF_ERROR(file.Open());
  auto sink = [&file](const char* data, size_t size) { return file.Write(data, size); };
  if (!root.Emit(sink)) return IoError("cannot write '" + path + "'");
  return file.Commit();
}

}  // namespace nee
