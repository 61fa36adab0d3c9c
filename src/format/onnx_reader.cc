#include "format/onnx_reader.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <optional>
#include <set>

#include "base/mapped_file.h"
#include "format/external_data.h"
#include "format/wire_decoder.h"

namespace nee {

using format::ByteRange;
using format::Decoder;
using format::Field;
using format::FieldName;
using format::MessageReader;
using format::PackedVarints;
using format::ScopeExit;
using format::WireType;

namespace {

// Field numbers, from onnx/onnx-ml.proto and onnx/onnx-data.proto.
constexpr FieldName kModelFields[] = {
    {1, "ir_version"}, {2, "producer_name"}, {3, "producer_version"}, {4, "domain"},
    {5, "model_version"}, {6, "doc_string"}, {7, "graph"}, {8, "opset_import"},
    {14, "metadata_props"}, {20, "training_info"}, {25, "functions"}, {26, "configuration"}};
constexpr FieldName kGraphFields[] = {
    {1, "node"}, {2, "name"}, {5, "initializer"}, {10, "doc_string"}, {11, "input"},
    {12, "output"}, {13, "value_info"}, {14, "quantization_annotation"},
    {15, "sparse_initializer"}, {16, "metadata_props"}};
constexpr FieldName kNodeFields[] = {
    {1, "input"}, {2, "output"}, {3, "name"}, {4, "op_type"}, {5, "attribute"},
    {6, "doc_string"}, {7, "domain"}, {8, "overload"}, {9, "metadata_props"},
    {10, "device_configurations"}};
constexpr FieldName kAttributeFields[] = {
    {1, "name"}, {2, "f"}, {3, "i"}, {4, "s"}, {5, "t"}, {6, "g"}, {7, "floats"},
    {8, "ints"}, {9, "strings"}, {10, "tensors"}, {11, "graphs"}, {13, "doc_string"},
    {14, "tp"}, {15, "type_protos"}, {20, "type"}, {21, "ref_attr_name"},
    {22, "sparse_tensor"}, {23, "sparse_tensors"}};
constexpr FieldName kTensorFields[] = {
    {1, "dims"}, {2, "data_type"}, {3, "segment"}, {4, "float_data"}, {5, "int32_data"},
    {6, "string_data"}, {7, "int64_data"}, {8, "name"}, {9, "raw_data"}, {10, "double_data"},
    {11, "uint64_data"}, {12, "doc_string"}, {13, "external_data"}, {14, "data_location"},
    {16, "metadata_props"}};
constexpr FieldName kSegmentFields[] = {{1, "begin"}, {2, "end"}};
constexpr FieldName kSparseTensorFields[] = {{1, "values"}, {2, "indices"}, {3, "dims"}};
constexpr FieldName kValueInfoFields[] = {
    {1, "name"}, {2, "type"}, {3, "doc_string"}, {4, "metadata_props"}};
constexpr FieldName kTypeFields[] = {
    {1, "tensor_type"}, {4, "sequence_type"}, {5, "map_type"}, {6, "denotation"},
    {7, "opaque_type"}, {8, "sparse_tensor_type"}, {9, "optional_type"}};
constexpr FieldName kTensorTypeFields[] = {{1, "elem_type"}, {2, "shape"}};
constexpr FieldName kElemTypeFields[] = {{1, "elem_type"}};
constexpr FieldName kMapTypeFields[] = {{1, "key_type"}, {2, "value_type"}};
constexpr FieldName kShapeFields[] = {{1, "dim"}};
constexpr FieldName kDimFields[] = {{1, "dim_value"}, {2, "dim_param"}, {3, "denotation"}};
constexpr FieldName kOpsetFields[] = {{1, "domain"}, {2, "version"}};
constexpr FieldName kEntryFields[] = {{1, "key"}, {2, "value"}};
constexpr FieldName kFunctionFields[] = {
    {1, "name"}, {4, "input"}, {5, "output"}, {6, "attribute"}, {7, "node"},
    {8, "doc_string"}, {9, "opset_import"}, {10, "domain"}, {11, "attribute_proto"},
    {12, "value_info"}, {13, "overload"}, {14, "metadata_props"}};
constexpr FieldName kSequenceFields[] = {
    {1, "name"}, {2, "elem_type"}, {3, "tensor_values"}, {4, "sparse_tensor_values"},
    {5, "sequence_values"}, {6, "map_values"}, {7, "optional_values"}};
constexpr FieldName kMapFields[] = {
    {1, "name"}, {2, "key_type"}, {3, "keys"}, {4, "string_keys"}, {5, "values"}};
constexpr FieldName kOptionalFields[] = {
    {1, "name"}, {2, "elem_type"}, {3, "tensor_value"}, {4, "sparse_tensor_value"},
    {5, "sequence_value"}, {6, "map_value"}, {7, "optional_value"}};

// SequenceProto / OptionalProto elem_type values.
enum ValueElemType { kValueTensor = 1, kValueSparse = 2, kValueSequence = 3, kValueMap = 4,
                     kValueOptional = 5 };

// Alignment a zero-copy view needs so that element loads are aligned.
size_t ElementAlignment(DataType type) {
  int bits = ElementBits(type);
  if (type == DataType::kComplex64) return 4;
  if (type == DataType::kComplex128) return 8;
  if (bits <= 8) return 1;
  return static_cast<size_t>(bits / 8 > 8 ? 8 : bits / 8);
}

// Which typed TensorProto field holds a data type's values.
enum class TypedField { kNone, kFloat, kInt32, kString, kInt64, kDouble, kUint64 };
const char* TypedFieldName(TypedField f) {
  switch (f) {
    case TypedField::kFloat: return "float_data";
    case TypedField::kInt32: return "int32_data";
    case TypedField::kString: return "string_data";
    case TypedField::kInt64: return "int64_data";
    case TypedField::kDouble: return "double_data";
    case TypedField::kUint64: return "uint64_data";
    case TypedField::kNone: break;
  }
  return "none";
}
TypedField TypedFieldFor(DataType type) {
  switch (type) {
    case DataType::kFloat: case DataType::kComplex64: return TypedField::kFloat;
    case DataType::kDouble: case DataType::kComplex128: return TypedField::kDouble;
    case DataType::kInt64: return TypedField::kInt64;
    case DataType::kUint32: case DataType::kUint64: return TypedField::kUint64;
    case DataType::kString: return TypedField::kString;
    case DataType::kUndefined: return TypedField::kNone;
    default: return TypedField::kInt32;  // int8/16/32, uint8/16, bool, 16-bit and 8-bit floats, sub-byte
  }
}

// A TensorProto's fields as found on the wire, before any allocation.
struct TensorFields {
  std::vector<int64_t> dims;
  int32_t data_type = 0;
  std::string name;
  std::string doc_string;
  bool has_raw = false;
  ByteRange raw;
  size_t raw_offset = 0;
  bool has_segment = false;
  // Typed fields as runs of their packed encoding (an unpacked element is a
  // run of one), so values can be counted before anything is allocated.
  std::vector<ByteRange> float_runs, int32_runs, int64_runs, double_runs, uint64_runs;
  std::vector<std::string_view> strings;
  std::vector<std::pair<std::string, std::string>> external_data;
  int32_t data_location = 0;
  size_t offset = 0;

  bool HasTyped(TypedField f) const {
    switch (f) {
      case TypedField::kFloat: return !float_runs.empty();
      case TypedField::kInt32: return !int32_runs.empty();
      case TypedField::kString: return !strings.empty();
      case TypedField::kInt64: return !int64_runs.empty();
      case TypedField::kDouble: return !double_runs.empty();
      case TypedField::kUint64: return !uint64_runs.empty();
      case TypedField::kNone: break;
    }
    return false;
  }
};

class OnnxParser {
 public:
  OnnxParser(std::shared_ptr<MappedFile> file, const ReadOptions& options, std::string root)
      : file_(std::move(file)),
        options_(options),
        d_(file_->data(), file_->size(), options.max_depth, std::move(root)),
        external_(options.base_dir, options.max_external_data_bytes) {}

  ByteRange whole() const { return {file_->data(), file_->size()}; }
  void set_strict(bool strict) { d_.set_strict(strict); }
  // Mappings that tensors now view (the model file and external data files).
  std::vector<std::shared_ptr<MappedFile>> TakeMappings() {
    std::vector<std::shared_ptr<MappedFile>> out;
    if (viewed_main_file_) out.push_back(file_);
    for (auto& m : external_.mappings()) out.push_back(m);
    return out;
  }

  Status ParseModel(ByteRange b, Model* model);
  // Fails when a supplied external tensor matched no tensor stored as external data.
  Status CheckSuppliedTensorsUsed() const;
  Status ParseTensor(ByteRange b, size_t offset, Tensor* tensor, std::string* name,
                     std::string* doc_string);
  Status ParseSequence(ByteRange b, Value* value);
  Status ParseMap(ByteRange b, Value* value);
  Status ParseOptional(ByteRange b, Value* value);

 private:
  // Parses a sub-message field with its path entry pushed.
  template <typename Fn>
  Status Sub(const MessageReader& m, const Field& f, const char* name, int64_t index, Fn&& fn) {
    NEE_ASSIGN_OR_RETURN(ByteRange bytes, m.Message(f));
    NEE_RETURN_IF_ERROR(d_.Enter(name, index, f.offset));
    ScopeExit leave(d_);
    return fn(bytes);
  }

  // Appends an element to `list` and parses the sub-message field into it
  // with `parse` (a member such as &OnnxParser::ParseNode); the path entry
  // names the element's index.
  template <typename T>
  Status SubAppend(const MessageReader& m, const Field& f, const char* name, std::vector<T>* list,
                   Status (OnnxParser::*parse)(ByteRange, T*)) {
    list->emplace_back();
    return Sub(m, f, name, static_cast<int64_t>(list->size() - 1),
               [&](ByteRange b) { return (this->*parse)(b, &list->back()); });
  }

  Status ParseGraph(ByteRange b, Graph* graph);
  Status ParseNode(ByteRange b, Node* node);
  Status ParseAttribute(ByteRange b, Attribute* attr);
  Status ParseValueInfo(ByteRange b, ValueInfo* info);
  Status ParseType(ByteRange b, TypeInfo* type);
  Status ParseTensorType(ByteRange b, TypeInfo* type);
  Status ParseShape(ByteRange b, Shape* shape);
  Status ParseDim(ByteRange b, Dim* dim);
  Status ParseOpset(ByteRange b, OpsetImport* opset);
  Status ParseEntry(ByteRange b, std::pair<std::string, std::string>* entry);
  Status ParseFunction(ByteRange b, Function* function);
  Status ParseSparseTensor(ByteRange b, SparseTensor* sparse);
  Status ParseSegment(ByteRange b);
  Status ParseTensorFields(ByteRange b, TensorFields* tf);
  Status BuildTensor(const TensorFields& tf, Tensor* tensor);
  Status BuildFromRaw(const TensorFields& tf, DataType type, std::vector<int64_t> dims,
                      int64_t count, Tensor* tensor);
  Status BuildFromTyped(const TensorFields& tf, DataType type, std::vector<int64_t> dims,
                        int64_t count, Tensor* tensor);
  Status UseSuppliedTensor(const TensorFields& tf, DataType type, const std::vector<int64_t>& dims,
                           const Tensor& supplied, Tensor* tensor);
  Status BuildFromExternal(const TensorFields& tf, DataType type, std::vector<int64_t> dims,
                           int64_t count, Tensor* tensor);
  // A view of `bytes` when aligned for `type`, otherwise a copy.
  Result<Tensor> ViewOrCopy(DataType type, std::vector<int64_t> dims, const uint8_t* bytes,
                            size_t size, std::shared_ptr<void> owner, bool* viewed);
  Status ElemTypeFromValue(int32_t value, size_t offset, const char* field, DataType* out);
  Status TensorsToMapValues(const std::vector<Value>& elements, size_t offset, Tensor* values);

  std::shared_ptr<MappedFile> file_;
  ReadOptions options_;
  Decoder d_;
  format::ExternalDataResolver external_;
  bool viewed_main_file_ = false;
  std::set<std::string> used_supplied_;  // names of options_.external_initializers met so far
  // Whether the attribute ParseAttribute last finished had no type field (or
  // type UNDEFINED), and the error for the first node holding such an
  // attribute: reported once the model's IR version is known (from 2 on the
  // field is required, as onnx.checker enforces; IR 1 files infer the type).
  bool last_attr_untyped_ = false;
  std::optional<Status> untyped_attr_error_;
};

// ---------------------------------------------------------------- model ---

Status OnnxParser::ParseModel(ByteRange b, Model* model) {
  MessageReader m(d_, b, kModelFields);
  bool has_graph = false;
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: { NEE_ASSIGN_OR_RETURN(model->ir_version, m.Int64(f)); break; }
      case 2: { NEE_ASSIGN_OR_RETURN(model->producer_name, m.String(f)); break; }
      case 3: { NEE_ASSIGN_OR_RETURN(model->producer_version, m.String(f)); break; }
      case 4: { NEE_ASSIGN_OR_RETURN(model->domain, m.String(f)); break; }
      case 5: { NEE_ASSIGN_OR_RETURN(model->model_version, m.Int64(f)); break; }
      case 6: { NEE_ASSIGN_OR_RETURN(model->doc_string, m.String(f)); break; }
      case 7:
        // protobuf merges repeated occurrences of a singular message field;
        // merging a graph into another is meaningless, so the last one wins
        // only if there is exactly one.
        if (has_graph) return m.Error("more than one graph", f);
        has_graph = true;
        NEE_RETURN_IF_ERROR(Sub(m, f, "graph", -1, [&](ByteRange g) { return ParseGraph(g, &model->graph); }));
        break;
      case 8:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "opset_import", &model->opset_imports, &OnnxParser::ParseOpset));
        break;
      case 14:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "metadata_props", &model->metadata_props, &OnnxParser::ParseEntry));
        break;
      case 20:  // training_info: not used for inference; framing already checked.
      case 26:  // configuration (device configurations)
        NEE_RETURN_IF_ERROR(m.Message(f).status());
        break;
      case 25:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "functions", &model->functions, &OnnxParser::ParseFunction));
        break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  if (!has_graph) return d_.Error("model has no graph", b.data ? d_.OffsetOf(b.data) : 0);
  if (model->ir_version >= 2 && untyped_attr_error_) return *untyped_attr_error_;
  return Status::Ok();
}

Status OnnxParser::ParseGraph(ByteRange b, Graph* graph) {
  MessageReader m(d_, b, kGraphFields);
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "node", &graph->nodes, &OnnxParser::ParseNode));
        break;
      case 2: { NEE_ASSIGN_OR_RETURN(graph->name, m.String(f)); break; }
      case 5: {
        graph->initializers.emplace_back();
        Initializer& init = graph->initializers.back();
        NEE_RETURN_IF_ERROR(Sub(m, f, "initializer", static_cast<int64_t>(graph->initializers.size() - 1),
                                [&](ByteRange t) {
                                  return ParseTensor(t, f.offset, &init.tensor, &init.name, &init.doc_string);
                                }));
        break;
      }
      case 10: { NEE_ASSIGN_OR_RETURN(graph->doc_string, m.String(f)); break; }
      case 11:
      case 12:
      case 13: {
        auto* list = f.number == 11 ? &graph->inputs : f.number == 12 ? &graph->outputs : &graph->value_info;
        const char* name = f.number == 11 ? "input" : f.number == 12 ? "output" : "value_info";
        NEE_RETURN_IF_ERROR(SubAppend(m, f, name, list, &OnnxParser::ParseValueInfo));
        break;
      }
      case 14:  // quantization_annotation: informational only.
        NEE_RETURN_IF_ERROR(m.Message(f).status());
        break;
      case 15:
        NEE_RETURN_IF_ERROR(
            SubAppend(m, f, "sparse_initializer", &graph->sparse_initializers, &OnnxParser::ParseSparseTensor));
        break;
      case 16:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "metadata_props", &graph->metadata_props, &OnnxParser::ParseEntry));
        break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ParseNode(ByteRange b, Node* node) {
  MessageReader m(d_, b, kNodeFields);
  size_t untyped = SIZE_MAX;  // index of the first attribute without a type
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: { NEE_ASSIGN_OR_RETURN(std::string s, m.String(f)); node->inputs.push_back(std::move(s)); break; }
      case 2: { NEE_ASSIGN_OR_RETURN(std::string s, m.String(f)); node->outputs.push_back(std::move(s)); break; }
      case 3: { NEE_ASSIGN_OR_RETURN(node->name, m.String(f)); break; }
      case 4: { NEE_ASSIGN_OR_RETURN(node->op_type, m.String(f)); break; }
      case 5:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "attribute", &node->attributes, &OnnxParser::ParseAttribute));
        if (last_attr_untyped_ && untyped == SIZE_MAX) untyped = node->attributes.size() - 1;
        break;
      case 6: { NEE_ASSIGN_OR_RETURN(node->doc_string, m.String(f)); break; }
      case 7: { NEE_ASSIGN_OR_RETURN(node->domain, m.String(f)); break; }
      case 8: { NEE_ASSIGN_OR_RETURN(node->overload, m.String(f)); break; }
      case 9:   // metadata_props: the IR node has no place for them.
      case 10:  // device_configurations
        NEE_RETURN_IF_ERROR(m.Message(f).status());
        break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  if (untyped != SIZE_MAX && !untyped_attr_error_)
    untyped_attr_error_ = d_.Error(node->Describe() + ": attribute '" + node->attributes[untyped].name +
                                       "' has no type (AttributeProto.type is required from IR version 2)",
                                   d_.OffsetOf(b.data));
  return Status::Ok();
}

Status OnnxParser::ParseAttribute(ByteRange b, Attribute* attr) {
  MessageReader m(d_, b, kAttributeFields);
  // Which value fields appeared, to infer the type of attributes written
  // without one (IR version 1 files).
  AttrType seen = AttrType::kUndefined;
  bool has_type = false;
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: { NEE_ASSIGN_OR_RETURN(attr->name, m.String(f)); break; }
      case 2: { NEE_ASSIGN_OR_RETURN(attr->f, m.Float(f)); seen = AttrType::kFloat; break; }
      case 3: { NEE_ASSIGN_OR_RETURN(attr->i, m.Int64(f)); seen = AttrType::kInt; break; }
      case 4: { NEE_ASSIGN_OR_RETURN(attr->s, m.String(f)); seen = AttrType::kString; break; }
      case 5: {
        std::string ignored_name, ignored_doc;
        NEE_RETURN_IF_ERROR(Sub(m, f, "t", -1, [&](ByteRange t) {
          return ParseTensor(t, f.offset, &attr->t, &ignored_name, &ignored_doc);
        }));
        seen = AttrType::kTensor;
        break;
      }
      case 6: {
        auto graph = std::make_shared<Graph>();
        NEE_RETURN_IF_ERROR(Sub(m, f, "g", -1, [&](ByteRange g) { return ParseGraph(g, graph.get()); }));
        attr->g = std::move(graph);
        seen = AttrType::kGraph;
        break;
      }
      case 7: NEE_RETURN_IF_ERROR(m.AppendFloats(f, &attr->floats)); seen = AttrType::kFloats; break;
      case 8: NEE_RETURN_IF_ERROR(m.AppendInt64s(f, &attr->ints)); seen = AttrType::kInts; break;
      case 9: {
        NEE_ASSIGN_OR_RETURN(std::string s, m.String(f));
        attr->strings.push_back(std::move(s));
        seen = AttrType::kStrings;
        break;
      }
      case 10: {
        attr->tensors.emplace_back();
        std::string ignored_name, ignored_doc;
        NEE_RETURN_IF_ERROR(Sub(m, f, "tensors", static_cast<int64_t>(attr->tensors.size() - 1), [&](ByteRange t) {
          return ParseTensor(t, f.offset, &attr->tensors.back(), &ignored_name, &ignored_doc);
        }));
        seen = AttrType::kTensors;
        break;
      }
      case 11: {
        auto graph = std::make_shared<Graph>();
        NEE_RETURN_IF_ERROR(Sub(m, f, "graphs", static_cast<int64_t>(attr->graphs.size()),
                                [&](ByteRange g) { return ParseGraph(g, graph.get()); }));
        attr->graphs.push_back(std::move(graph));
        seen = AttrType::kGraphs;
        break;
      }
      case 13: { NEE_ASSIGN_OR_RETURN(attr->doc_string, m.String(f)); break; }
      case 14:
        NEE_RETURN_IF_ERROR(Sub(m, f, "tp", -1, [&](ByteRange t) { return ParseType(t, &attr->tp); }));
        seen = AttrType::kTypeProto;
        break;
      case 15:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "type_protos", &attr->type_protos, &OnnxParser::ParseType));
        seen = AttrType::kTypeProtos;
        break;
      case 20: {
        NEE_ASSIGN_OR_RETURN(int32_t type, m.Int32(f));
        if (type < 0 || type > static_cast<int32_t>(AttrType::kTypeProtos))
          return m.Error("invalid attribute type " + std::to_string(type), f);
        attr->type = static_cast<AttrType>(type);
        has_type = true;
        break;
      }
      case 21: { NEE_ASSIGN_OR_RETURN(attr->ref_attr_name, m.String(f)); break; }
      case 22:
        NEE_RETURN_IF_ERROR(Sub(m, f, "sparse_tensor", -1,
                                [&](ByteRange s) { return ParseSparseTensor(s, &attr->sparse_tensor); }));
        seen = AttrType::kSparseTensor;
        break;
      case 23:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "sparse_tensors", &attr->sparse_tensors, &OnnxParser::ParseSparseTensor));
        seen = AttrType::kSparseTensors;
        break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  last_attr_untyped_ = !has_type || attr->type == AttrType::kUndefined;
  if (last_attr_untyped_) attr->type = seen;
  // An attribute must carry the value its type announces (a reference to a
  // calling node's attribute, inside a function body, carries none).
  if (attr->type == AttrType::kUndefined)
    return d_.Error("attribute '" + attr->name + "' has no type and no value", d_.OffsetOf(b.data));
  if (attr->ref_attr_name.empty()) {
    const char* missing = nullptr;
    if (attr->type == AttrType::kGraph && !attr->g) missing = "has type GRAPH but holds no graph";
    else if (attr->type == AttrType::kTensor && !attr->t.defined()) missing = "has type TENSOR but holds no tensor";
    else if (attr->type == AttrType::kSparseTensor && !attr->sparse_tensor.values.defined())
      missing = "has type SPARSE_TENSOR but holds no sparse tensor";
    if (missing) return d_.Error("attribute '" + attr->name + "' " + missing, d_.OffsetOf(b.data));
  }
  return Status::Ok();
}

Status OnnxParser::ParseValueInfo(ByteRange b, ValueInfo* info) {
  MessageReader m(d_, b, kValueInfoFields);
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: { NEE_ASSIGN_OR_RETURN(info->name, m.String(f)); break; }
      case 2:
        NEE_RETURN_IF_ERROR(Sub(m, f, "type", -1, [&](ByteRange t) { return ParseType(t, &info->type); }));
        break;
      case 3: { NEE_ASSIGN_OR_RETURN(info->doc_string, m.String(f)); break; }
      case 4:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "metadata_props", &info->metadata_props, &OnnxParser::ParseEntry));
        break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ElemTypeFromValue(int32_t value, size_t offset, const char* field, DataType* out) {
  // 0 (undefined) is allowed in types: partially specified value infos use it.
  if (value != 0 && !IsValidDataType(value))
    return d_.Error("unsupported element type " + std::to_string(value), offset, field);
  *out = static_cast<DataType>(value);
  return Status::Ok();
}

Status OnnxParser::ParseType(ByteRange b, TypeInfo* type) {
  MessageReader m(d_, b, kTypeFields);
  std::string denotation;
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1:
      case 8: {
        bool sparse = f.number == 8;
        NEE_RETURN_IF_ERROR(Sub(m, f, sparse ? "sparse_tensor_type" : "tensor_type", -1,
                                [&](ByteRange t) { return ParseTensorType(t, type); }));
        type->kind = sparse ? TypeInfo::Kind::kSparseTensor : TypeInfo::Kind::kTensor;
        break;
      }
      case 4:
      case 9: {
        bool optional = f.number == 9;
        TypeInfo inner;
        NEE_RETURN_IF_ERROR(Sub(m, f, optional ? "optional_type" : "sequence_type", -1, [&](ByteRange s) {
          MessageReader sm(d_, s, kElemTypeFields);
          while (!sm.done()) {
            Field sf;
            NEE_RETURN_IF_ERROR(sm.Next(&sf));
            if (sf.number == 1) {
              NEE_RETURN_IF_ERROR(Sub(sm, sf, "elem_type", -1, [&](ByteRange e) { return ParseType(e, &inner); }));
            } else {
              NEE_RETURN_IF_ERROR(sm.Unknown(sf));
            }
          }
          return Status::Ok();
        }));
        *type = optional ? TypeInfo::Optional(std::move(inner)) : TypeInfo::Sequence(std::move(inner));
        break;
      }
      case 5: {
        DataType key = DataType::kUndefined;
        TypeInfo value;
        NEE_RETURN_IF_ERROR(Sub(m, f, "map_type", -1, [&](ByteRange s) {
          MessageReader mm(d_, s, kMapTypeFields);
          while (!mm.done()) {
            Field mf;
            NEE_RETURN_IF_ERROR(mm.Next(&mf));
            if (mf.number == 1) {
              NEE_ASSIGN_OR_RETURN(int32_t k, mm.Int32(mf));
              NEE_RETURN_IF_ERROR(ElemTypeFromValue(k, mf.offset, "key_type", &key));
            } else if (mf.number == 2) {
              NEE_RETURN_IF_ERROR(Sub(mm, mf, "value_type", -1, [&](ByteRange v) { return ParseType(v, &value); }));
            } else {
              NEE_RETURN_IF_ERROR(mm.Unknown(mf));
            }
          }
          return Status::Ok();
        }));
        *type = TypeInfo::Map(key, std::move(value));
        break;
      }
      case 6: { NEE_ASSIGN_OR_RETURN(denotation, m.String(f)); break; }
      case 7:  // opaque_type: no runtime meaning; the type stays unknown.
        NEE_RETURN_IF_ERROR(m.Message(f).status());
        break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  type->denotation = std::move(denotation);
  return Status::Ok();
}

Status OnnxParser::ParseTensorType(ByteRange b, TypeInfo* type) {
  MessageReader m(d_, b, kTensorTypeFields);
  type->shape.reset();
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    if (f.number == 1) {
      NEE_ASSIGN_OR_RETURN(int32_t t, m.Int32(f));
      NEE_RETURN_IF_ERROR(ElemTypeFromValue(t, f.offset, "elem_type", &type->elem_type));
    } else if (f.number == 2) {
      Shape shape;
      NEE_RETURN_IF_ERROR(Sub(m, f, "shape", -1, [&](ByteRange s) { return ParseShape(s, &shape); }));
      type->shape = std::move(shape);
    } else {
      NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ParseShape(ByteRange b, Shape* shape) {
  MessageReader m(d_, b, kShapeFields);
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    if (f.number == 1) {
      NEE_RETURN_IF_ERROR(SubAppend(m, f, "dim", shape, &OnnxParser::ParseDim));
    } else {
      NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ParseDim(ByteRange b, Dim* dim) {
  MessageReader m(d_, b, kDimFields);
  *dim = Dim::Unknown();
  std::string denotation;  // kept across the dim_value / dim_param oneof, which replaces *dim
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: {  // oneof: the last of dim_value / dim_param wins
        NEE_ASSIGN_OR_RETURN(int64_t v, m.Int64(f));
        // A negative size carries no information; keep the dim unknown.
        *dim = v >= 0 ? Dim::Known(v) : Dim::Unknown();
        break;
      }
      case 2: {
        NEE_ASSIGN_OR_RETURN(std::string s, m.String(f));
        *dim = s.empty() ? Dim::Unknown() : Dim::Symbol(std::move(s));
        break;
      }
      case 3: {
        NEE_ASSIGN_OR_RETURN(denotation, m.String(f));
        break;
      }
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  dim->denotation = std::move(denotation);
  return Status::Ok();
}

Status OnnxParser::ParseOpset(ByteRange b, OpsetImport* opset) {
  MessageReader m(d_, b, kOpsetFields);
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    if (f.number == 1) {
      NEE_ASSIGN_OR_RETURN(opset->domain, m.String(f));
    } else if (f.number == 2) {
      NEE_ASSIGN_OR_RETURN(opset->version, m.Int64(f));
    } else {
      NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ParseEntry(ByteRange b, std::pair<std::string, std::string>* entry) {
  MessageReader m(d_, b, kEntryFields);
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    if (f.number == 1) {
      NEE_ASSIGN_OR_RETURN(entry->first, m.String(f));
    } else if (f.number == 2) {
      NEE_ASSIGN_OR_RETURN(entry->second, m.String(f));
    } else {
      NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ParseFunction(ByteRange b, Function* fn) {
  MessageReader m(d_, b, kFunctionFields);
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: { NEE_ASSIGN_OR_RETURN(fn->name, m.String(f)); break; }
      case 4: { NEE_ASSIGN_OR_RETURN(std::string s, m.String(f)); fn->inputs.push_back(std::move(s)); break; }
      case 5: { NEE_ASSIGN_OR_RETURN(std::string s, m.String(f)); fn->outputs.push_back(std::move(s)); break; }
      case 6: { NEE_ASSIGN_OR_RETURN(std::string s, m.String(f)); fn->attribute_names.push_back(std::move(s)); break; }
      case 7:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "node", &fn->nodes, &OnnxParser::ParseNode));
        break;
      case 8: { NEE_ASSIGN_OR_RETURN(fn->doc_string, m.String(f)); break; }
      case 9:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "opset_import", &fn->opset_imports, &OnnxParser::ParseOpset));
        break;
      case 10: { NEE_ASSIGN_OR_RETURN(fn->domain, m.String(f)); break; }
      case 11:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "attribute_proto", &fn->attribute_defaults, &OnnxParser::ParseAttribute));
        break;
      case 12:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "value_info", &fn->value_info, &OnnxParser::ParseValueInfo));
        break;
      case 13: { NEE_ASSIGN_OR_RETURN(fn->overload, m.String(f)); break; }
      case 14:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "metadata_props", &fn->metadata_props, &OnnxParser::ParseEntry));
        break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ParseSparseTensor(ByteRange b, SparseTensor* sparse) {
  MessageReader m(d_, b, kSparseTensorFields);
  std::string doc;
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1:
        NEE_RETURN_IF_ERROR(Sub(m, f, "values", -1, [&](ByteRange t) {
          return ParseTensor(t, f.offset, &sparse->values, &sparse->name, &doc);
        }));
        break;
      case 2: {
        std::string ignored;
        NEE_RETURN_IF_ERROR(Sub(m, f, "indices", -1, [&](ByteRange t) {
          return ParseTensor(t, f.offset, &sparse->indices, &ignored, &doc);
        }));
        break;
      }
      case 3: NEE_RETURN_IF_ERROR(m.AppendInt64s(f, &sparse->dims)); break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  for (int64_t d : sparse->dims)
    if (d < 0) return d_.Error("negative dimension in sparse tensor '" + sparse->name + "'", d_.OffsetOf(b.data));
  // Both parts are required (an empty sparse tensor has empty values and indices).
  if (!sparse->values.defined())
    return d_.Error("sparse tensor '" + sparse->name + "' has no values", d_.OffsetOf(b.data));
  if (!sparse->indices.defined())
    return d_.Error("sparse tensor '" + sparse->name + "' has no indices", d_.OffsetOf(b.data));
  return Status::Ok();
}

// --------------------------------------------------------------- tensors ---

Status OnnxParser::ParseSegment(ByteRange b) {
  MessageReader m(d_, b, kSegmentFields);
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    if (f.number == 1 || f.number == 2) {
      NEE_RETURN_IF_ERROR(m.Int64(f).status());
    } else {
      NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ParseTensorFields(ByteRange b, TensorFields* tf) {
  MessageReader m(d_, b, kTensorFields);
  // Accepts one unpacked element (wire type `scalar`) or a packed run.
  auto add_run = [&m](const Field& f, WireType scalar, size_t width, std::vector<ByteRange>* runs) -> Status {
    if (f.wire_type == scalar) {
      runs->push_back(f.payload);
      return Status::Ok();
    }
    NEE_ASSIGN_OR_RETURN(ByteRange run, m.Message(f));
    if (width > 0 && run.size % width != 0)
      return m.Error("packed field size " + std::to_string(run.size) + " is not a multiple of " +
                         std::to_string(width),
                     f);
    if (width == 0 && PackedVarints::Count(run) < 0) return m.Error("malformed packed varint", f);
    if (run.size > 0) runs->push_back(run);
    return Status::Ok();
  };
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: NEE_RETURN_IF_ERROR(m.AppendInt64s(f, &tf->dims)); break;
      case 2: { NEE_ASSIGN_OR_RETURN(tf->data_type, m.Int32(f)); break; }
      case 3:
        tf->has_segment = true;
        NEE_RETURN_IF_ERROR(Sub(m, f, "segment", -1, [&](ByteRange s) { return ParseSegment(s); }));
        break;
      case 4: NEE_RETURN_IF_ERROR(add_run(f, WireType::kFixed32, 4, &tf->float_runs)); break;
      case 5: NEE_RETURN_IF_ERROR(add_run(f, WireType::kVarint, 0, &tf->int32_runs)); break;
      case 6: { NEE_ASSIGN_OR_RETURN(std::string_view s, m.Bytes(f)); tf->strings.push_back(s); break; }
      case 7: NEE_RETURN_IF_ERROR(add_run(f, WireType::kVarint, 0, &tf->int64_runs)); break;
      case 8: { NEE_ASSIGN_OR_RETURN(tf->name, m.String(f)); break; }
      case 9: {
        NEE_ASSIGN_OR_RETURN(tf->raw, m.Message(f));
        tf->has_raw = true;
        tf->raw_offset = f.offset;
        break;
      }
      case 10: NEE_RETURN_IF_ERROR(add_run(f, WireType::kFixed64, 8, &tf->double_runs)); break;
      case 11: NEE_RETURN_IF_ERROR(add_run(f, WireType::kVarint, 0, &tf->uint64_runs)); break;
      case 12: { NEE_ASSIGN_OR_RETURN(tf->doc_string, m.String(f)); break; }
      case 13:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "external_data", &tf->external_data, &OnnxParser::ParseEntry));
        break;
      case 14: { NEE_ASSIGN_OR_RETURN(tf->data_location, m.Int32(f)); break; }
      case 16:  // metadata_props: not kept
        NEE_RETURN_IF_ERROR(m.Message(f).status());
        break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ParseTensor(ByteRange b, size_t offset, Tensor* tensor, std::string* name,
                               std::string* doc_string) {
  TensorFields tf;
  tf.offset = offset;
  NEE_RETURN_IF_ERROR(ParseTensorFields(b, &tf));
  NEE_RETURN_IF_ERROR(BuildTensor(tf, tensor));
  *name = std::move(tf.name);
  *doc_string = std::move(tf.doc_string);
  return Status::Ok();
}

Status OnnxParser::BuildTensor(const TensorFields& tf, Tensor* tensor) {
  const std::string who = "tensor '" + tf.name + "': ";
  if (tf.has_segment) return d_.Error(who + "segmented tensors are not supported", tf.offset);
  if (!IsValidDataType(tf.data_type))
    return d_.Error(who + (tf.data_type == 0 ? std::string("data_type is not set")
                                             : "unsupported data_type " + std::to_string(tf.data_type)),
                    tf.offset, "data_type");
  DataType type = static_cast<DataType>(tf.data_type);
  for (int64_t dim : tf.dims)
    if (dim < 0) return d_.Error(who + "negative dimension in " + DimsToString(tf.dims), tf.offset, "dims");
  auto count_or = CheckedElementCount(tf.dims);
  if (!count_or.ok()) return d_.Error(who + count_or.status().message(), tf.offset, "dims");
  int64_t count = count_or.value();
  // Bounds the byte computations below; the data present is checked after.
  const bool custom_limit = options_.max_tensor_bytes > 0 && options_.max_tensor_bytes < kMaxTensorBytes;
  const int64_t max_bytes = custom_limit ? options_.max_tensor_bytes : kMaxTensorBytes;
  if (count > max_bytes * 8 / ElementBits(type))
    return d_.Error(who + "shape " + DimsToString(tf.dims) + " needs more than the limit of " +
                        std::to_string(max_bytes) + " bytes per tensor" +
                        (custom_limit ? " (SessionOptions max_tensor_bytes)" : ""),
                    tf.offset, "dims");

  if (tf.data_location == 1) return BuildFromExternal(tf, type, tf.dims, count, tensor);
  if (tf.data_location != 0)
    return d_.Error(who + "invalid data_location " + std::to_string(tf.data_location), tf.offset, "data_location");
  if (tf.has_raw) return BuildFromRaw(tf, type, tf.dims, count, tensor);
  return BuildFromTyped(tf, type, tf.dims, count, tensor);
}

Result<Tensor> OnnxParser::ViewOrCopy(DataType type, std::vector<int64_t> dims, const uint8_t* bytes,
                                      size_t size, std::shared_ptr<void> owner, bool* viewed) {
  if (size > 0 && reinterpret_cast<uintptr_t>(bytes) % ElementAlignment(type) == 0) {
    *viewed = true;
    return Tensor::View(type, std::move(dims), const_cast<uint8_t*>(bytes), std::move(owner));
  }
  // Unaligned (or empty): an owned copy, since unaligned element loads are UB.
  *viewed = false;
  if (size == 0) return Tensor::Allocate(type, std::move(dims));
  // Not Tensor::Allocate: its zero-fill would touch every page a second time.
  void* copy = ::operator new(size, std::align_val_t(64), std::nothrow);
  if (!copy) return OutOfMemory("cannot allocate " + std::to_string(size) + " bytes for a tensor");
  // The copy is what everyone reads from now on: the mapped file's pages
  // need not stay resident beside it (a no-op unless they are file pages).
  // Chunk by chunk, so that a large tensor's copy and its file pages are
  // never resident together in full (a peak of twice its size).
  constexpr size_t kChunk = size_t{4} << 20;
  for (size_t done = 0; done < size; done += kChunk) {
    const size_t n = std::min(kChunk, size - done);
    std::memcpy(static_cast<uint8_t*>(copy) + done, bytes + done, n);
    ReleaseFileBackedPages(bytes + done, n);
  }
  ReleaseFileBackedPages(bytes, size);  // the pages that straddled two chunks
  std::shared_ptr<void> copy_owner(copy, [](void* p) { ::operator delete(p, std::align_val_t(64)); });
  return Tensor::View(type, std::move(dims), copy, std::move(copy_owner));
}

Status OnnxParser::BuildFromRaw(const TensorFields& tf, DataType type, std::vector<int64_t> dims,
                                int64_t count, Tensor* tensor) {
  const std::string who = "tensor '" + tf.name + "': ";
  if (type == DataType::kString)
    return d_.Error(who + "string tensors cannot use raw_data", tf.raw_offset, "raw_data");
  size_t expected = StorageBytes(type, count);
  if (tf.raw.size != expected)
    return d_.Error(who + "raw_data has " + std::to_string(tf.raw.size) + " bytes, expected " +
                        std::to_string(expected) + " for " + DataTypeName(type) + DimsToString(dims),
                    tf.raw_offset, "raw_data");
  bool viewed = false;
  NEE_ASSIGN_OR_RETURN(*tensor, ViewOrCopy(type, std::move(dims), tf.raw.data, tf.raw.size, file_, &viewed));
  if (viewed) viewed_main_file_ = true;
  return Status::Ok();
}

namespace {

// Sums the element count of packed runs (fixed width or varint).
int64_t CountRunValues(const std::vector<ByteRange>& runs, size_t width) {
  int64_t total = 0;
  for (const ByteRange& r : runs) total += width ? static_cast<int64_t>(r.size / width) : PackedVarints::Count(r);
  return total;
}

template <typename Fn>
void ForEachVarint(const std::vector<ByteRange>& runs, Fn&& fn) {
  for (const ByteRange& r : runs) {
    PackedVarints it(r);
    uint64_t v;
    while (it.Next(&v)) fn(v);
  }
}

void CopyFixedRuns(const std::vector<ByteRange>& runs, uint8_t* out) {
  for (const ByteRange& r : runs) {
    std::memcpy(out, r.data, r.size);
    out += r.size;
  }
}

}  // namespace

Status OnnxParser::BuildFromTyped(const TensorFields& tf, DataType type, std::vector<int64_t> dims,
                                  int64_t count, Tensor* tensor) {
  const std::string who = "tensor '" + tf.name + "': ";
  TypedField field = TypedFieldFor(type);
  for (TypedField other : {TypedField::kFloat, TypedField::kInt32, TypedField::kString, TypedField::kInt64,
                           TypedField::kDouble, TypedField::kUint64}) {
    if (other != field && tf.HasTyped(other))
      return d_.Error(who + TypedFieldName(other) + " cannot hold " + DataTypeName(type) + " values",
                      tf.offset, TypedFieldName(other));
  }
  bool complex = type == DataType::kComplex64 || type == DataType::kComplex128;
  // Number of values the typed field must hold for `count` elements.
  int64_t expected_values = complex ? count * 2 : count;
  int64_t present = 0;
  switch (field) {
    case TypedField::kFloat: present = CountRunValues(tf.float_runs, 4); break;
    case TypedField::kDouble: present = CountRunValues(tf.double_runs, 8); break;
    case TypedField::kInt64: present = CountRunValues(tf.int64_runs, 0); break;
    case TypedField::kUint64: present = CountRunValues(tf.uint64_runs, 0); break;
    case TypedField::kString: present = static_cast<int64_t>(tf.strings.size()); break;
    case TypedField::kInt32:
      present = CountRunValues(tf.int32_runs, 0);
      // Sub-byte types store one packed byte per int32 value.
      if (IsSubByte(type)) expected_values = static_cast<int64_t>(StorageBytes(type, count));
      break;
    case TypedField::kNone: break;
  }
  if (present != expected_values) {
    if (present == 0 && count > 0)
      return d_.Error(who + "no data for " + std::to_string(count) + " elements of " + DataTypeName(type) +
                          DimsToString(dims),
                      tf.offset);
    return d_.Error(who + TypedFieldName(field) + " has " + std::to_string(present) + " values, expected " +
                        std::to_string(expected_values) + " for " + DataTypeName(type) + DimsToString(dims),
                    tf.offset, TypedFieldName(field));
  }
  // The count now matches data actually present in the file, so this
  // allocation is bounded by the file size.
  NEE_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(type, std::move(dims)));
  uint8_t* out = static_cast<uint8_t*>(t.raw_data());
  switch (field) {
    case TypedField::kFloat: CopyFixedRuns(tf.float_runs, out); break;
    case TypedField::kDouble: CopyFixedRuns(tf.double_runs, out); break;
    case TypedField::kInt64: {
      int64_t* p = t.data<int64_t>();
      ForEachVarint(tf.int64_runs, [&p](uint64_t v) { *p++ = static_cast<int64_t>(v); });
      break;
    }
    case TypedField::kUint64: {
      if (type == DataType::kUint64) {
        uint64_t* p = t.data<uint64_t>();
        ForEachVarint(tf.uint64_runs, [&p](uint64_t v) { *p++ = v; });
      } else {
        uint32_t* p = t.data<uint32_t>();
        ForEachVarint(tf.uint64_runs, [&p](uint64_t v) { *p++ = static_cast<uint32_t>(v); });
      }
      break;
    }
    case TypedField::kString: {
      std::string* p = t.data<std::string>();
      for (std::string_view s : tf.strings) *p++ = std::string(s);
      break;
    }
    case TypedField::kInt32: {
      int bits = ElementBits(type);
      if (type == DataType::kBool) {
        ForEachVarint(tf.int32_runs, [&out](uint64_t v) { *out++ = static_cast<uint32_t>(v) != 0 ? 1 : 0; });
      } else if (bits <= 8) {  // 8-bit types and packed sub-byte bytes
        ForEachVarint(tf.int32_runs, [&out](uint64_t v) { *out++ = static_cast<uint8_t>(v); });
      } else if (bits == 16) {
        uint16_t* p = t.data<uint16_t>();
        ForEachVarint(tf.int32_runs, [&p](uint64_t v) { *p++ = static_cast<uint16_t>(v); });
      } else {
        int32_t* p = t.data<int32_t>();
        ForEachVarint(tf.int32_runs, [&p](uint64_t v) { *p++ = static_cast<int32_t>(static_cast<uint32_t>(v)); });
      }
      break;
    }
    case TypedField::kNone: break;
  }
  *tensor = std::move(t);
  return Status::Ok();
}

Status OnnxParser::BuildFromExternal(const TensorFields& tf, DataType type, std::vector<int64_t> dims,
                                     int64_t count, Tensor* tensor) {
  const std::string who = "tensor '" + tf.name + "': ";
  auto supplied = options_.external_initializers.find(tf.name);
  if (supplied != options_.external_initializers.end())
    return UseSuppliedTensor(tf, type, dims, supplied->second, tensor);
  if (type == DataType::kString)
    return d_.Error(who + "string tensors cannot use external data", tf.offset, "data_location");
  size_t expected = StorageBytes(type, count);
  auto slice_or = external_.Resolve(tf.name, tf.external_data, expected);
  if (!slice_or.ok()) return d_.Error(slice_or.status().message(), tf.offset, "external_data");
  const format::ExternalSlice& slice = slice_or.value();
  bool viewed = false;
  NEE_ASSIGN_OR_RETURN(*tensor, ViewOrCopy(type, std::move(dims), slice.data, slice.size, slice.file, &viewed));
  return Status::Ok();
}

Status OnnxParser::UseSuppliedTensor(const TensorFields& tf, DataType type, const std::vector<int64_t>& dims,
                                     const Tensor& supplied, Tensor* tensor) {
  if (supplied.dtype() != type || supplied.dims() != dims)
    return InvalidArgument("external initializer '" + tf.name + "': the model stores " + DataTypeName(type) +
                           ShapeToString(ShapeFromDims(dims)) + " but the supplied tensor is " +
                           DataTypeName(supplied.dtype()) + ShapeToString(ShapeFromDims(supplied.dims())));
  used_supplied_.insert(tf.name);
  *tensor = supplied;
  return Status::Ok();
}

Status OnnxParser::CheckSuppliedTensorsUsed() const {
  for (const auto& [name, tensor] : options_.external_initializers)
    if (!used_supplied_.count(name))
      return InvalidArgument("external initializer '" + name +
                             "' was supplied but the model stores no tensor of that name as external data");
  return Status::Ok();
}

// ---------------------------------------------------- sequence/map/optional ---

Status OnnxParser::ParseSequence(ByteRange b, Value* value) {
  MessageReader m(d_, b, kSequenceFields);
  int32_t elem_type = 0;
  std::vector<Value> elements;
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    int64_t index = static_cast<int64_t>(elements.size());
    switch (f.number) {
      case 1: NEE_RETURN_IF_ERROR(m.Bytes(f).status()); break;
      case 2: { NEE_ASSIGN_OR_RETURN(elem_type, m.Int32(f)); break; }
      case 3: {
        Tensor t;
        std::string name, doc;
        NEE_RETURN_IF_ERROR(Sub(m, f, "tensor_values", index,
                                [&](ByteRange tb) { return ParseTensor(tb, f.offset, &t, &name, &doc); }));
        elements.emplace_back(std::move(t));
        break;
      }
      case 4:
        return m.Error("sparse tensors in sequences are not supported", f);
      case 5:
      case 6:
      case 7: {
        Value v;
        const char* name = f.number == 5 ? "sequence_values" : f.number == 6 ? "map_values" : "optional_values";
        NEE_RETURN_IF_ERROR(Sub(m, f, name, index, [&](ByteRange vb) {
          return f.number == 5 ? ParseSequence(vb, &v) : f.number == 6 ? ParseMap(vb, &v) : ParseOptional(vb, &v);
        }));
        elements.push_back(std::move(v));
        break;
      }
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  if (elem_type < 0 || elem_type > kValueOptional)
    return d_.Error("invalid sequence elem_type " + std::to_string(elem_type), d_.OffsetOf(b.data), "elem_type");
  // The element type, as far as the values tell it.
  TypeInfo element_type;
  if (elem_type == kValueTensor || (!elements.empty() && elements[0].is_tensor())) {
    element_type = TypeInfo::Tensor(elements.empty() ? DataType::kUndefined : elements[0].tensor().dtype());
  } else if (elem_type == kValueSequence) {
    element_type = TypeInfo::Sequence(TypeInfo());
  }
  *value = Value::Sequence(std::move(elements), std::move(element_type));
  return Status::Ok();
}

// Stacks a map's scalar (or same-shaped) value tensors into one tensor.
Status OnnxParser::TensorsToMapValues(const std::vector<Value>& elements, size_t offset, Tensor* values) {
  if (elements.empty()) {
    NEE_ASSIGN_OR_RETURN(*values, Tensor::Allocate(DataType::kFloat, {0}));
    return Status::Ok();
  }
  for (const Value& v : elements)
    if (!v.is_tensor()) return d_.Error("map values must be tensors", offset, "values");
  const Tensor& first = elements[0].tensor();
  std::vector<int64_t> dims = {static_cast<int64_t>(elements.size())};
  dims.insert(dims.end(), first.dims().begin(), first.dims().end());
  for (const Value& v : elements)
    if (v.tensor().dtype() != first.dtype() || v.tensor().dims() != first.dims())
      return d_.Error("map values differ in type or shape", offset, "values");
  NEE_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(first.dtype(), dims));
  if (first.dtype() == DataType::kString) {
    std::string* p = out.data<std::string>();
    for (const Value& v : elements)
      for (const std::string& s : v.tensor().span<std::string>()) *p++ = s;
  } else {
    uint8_t* p = static_cast<uint8_t*>(out.raw_data());
    for (const Value& v : elements) {
      std::memcpy(p, v.tensor().raw_data(), v.tensor().byte_size());
      p += v.tensor().byte_size();
    }
  }
  *values = std::move(out);
  return Status::Ok();
}

Status OnnxParser::ParseMap(ByteRange b, Value* value) {
  MessageReader m(d_, b, kMapFields);
  int32_t key_type = 0;
  std::vector<int64_t> keys;
  std::vector<std::string> string_keys;
  Value values;
  bool has_values = false;
  size_t values_offset = d_.OffsetOf(b.data);
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: NEE_RETURN_IF_ERROR(m.Bytes(f).status()); break;
      case 2: { NEE_ASSIGN_OR_RETURN(key_type, m.Int32(f)); break; }
      case 3: NEE_RETURN_IF_ERROR(m.AppendInt64s(f, &keys)); break;
      case 4: { NEE_ASSIGN_OR_RETURN(std::string s, m.String(f)); string_keys.push_back(std::move(s)); break; }
      case 5:
        has_values = true;
        values_offset = f.offset;
        NEE_RETURN_IF_ERROR(Sub(m, f, "values", -1, [&](ByteRange vb) { return ParseSequence(vb, &values); }));
        break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  size_t offset = d_.OffsetOf(b.data);
  if (!IsValidDataType(key_type) || (!IsSignedInteger(static_cast<DataType>(key_type)) &&
                                     !IsUnsignedInteger(static_cast<DataType>(key_type)) &&
                                     key_type != static_cast<int32_t>(DataType::kString)) ||
      IsSubByte(static_cast<DataType>(key_type)))
    return d_.Error("invalid map key_type " + std::to_string(key_type), offset, "key_type");
  DataType key = static_cast<DataType>(key_type);
  bool string_key = key == DataType::kString;
  if (string_key ? !keys.empty() : !string_keys.empty())
    return d_.Error("map keys stored in the wrong field for key type " + std::string(DataTypeName(key)), offset);
  int64_t n = static_cast<int64_t>(string_key ? string_keys.size() : keys.size());
  size_t n_values = has_values ? values.elements().size() : 0;
  if (static_cast<size_t>(n) != n_values)
    return d_.Error("map has " + std::to_string(n) + " keys but " + std::to_string(n_values) + " values", offset);
  NEE_ASSIGN_OR_RETURN(Tensor key_tensor, Tensor::Allocate(key, {n}));
  for (int64_t i = 0; i < n; ++i) {
    switch (key) {
      case DataType::kString: key_tensor.data<std::string>()[i] = string_keys[i]; break;
      case DataType::kInt8: key_tensor.data<int8_t>()[i] = static_cast<int8_t>(keys[i]); break;
      case DataType::kInt16: key_tensor.data<int16_t>()[i] = static_cast<int16_t>(keys[i]); break;
      case DataType::kInt32: key_tensor.data<int32_t>()[i] = static_cast<int32_t>(keys[i]); break;
      case DataType::kInt64: key_tensor.data<int64_t>()[i] = keys[i]; break;
      case DataType::kUint8: key_tensor.data<uint8_t>()[i] = static_cast<uint8_t>(keys[i]); break;
      case DataType::kUint16: key_tensor.data<uint16_t>()[i] = static_cast<uint16_t>(keys[i]); break;
      case DataType::kUint32: key_tensor.data<uint32_t>()[i] = static_cast<uint32_t>(keys[i]); break;
      case DataType::kUint64: key_tensor.data<uint64_t>()[i] = static_cast<uint64_t>(keys[i]); break;
      default: break;
    }
  }
  Tensor value_tensor;
  if (has_values) {
    NEE_RETURN_IF_ERROR(TensorsToMapValues(values.elements(), values_offset, &value_tensor));
  } else {
    NEE_ASSIGN_OR_RETURN(value_tensor, Tensor::Allocate(DataType::kFloat, {0}));
  }
  *value = Value::Map(std::move(key_tensor), std::move(value_tensor));
  return Status::Ok();
}

Status OnnxParser::ParseOptional(ByteRange b, Value* value) {
  MessageReader m(d_, b, kOptionalFields);
  int32_t elem_type = 0;
  std::optional<Value> contents;
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: NEE_RETURN_IF_ERROR(m.Bytes(f).status()); break;
      case 2: { NEE_ASSIGN_OR_RETURN(elem_type, m.Int32(f)); break; }
      case 3: {
        Tensor t;
        std::string name, doc;
        NEE_RETURN_IF_ERROR(Sub(m, f, "tensor_value", -1,
                                [&](ByteRange tb) { return ParseTensor(tb, f.offset, &t, &name, &doc); }));
        contents = Value(std::move(t));
        break;
      }
      case 4:
        return m.Error("sparse tensors in optionals are not supported", f);
      case 5:
      case 6:
      case 7: {
        Value v;
        const char* name = f.number == 5 ? "sequence_value" : f.number == 6 ? "map_value" : "optional_value";
        NEE_RETURN_IF_ERROR(Sub(m, f, name, -1, [&](ByteRange vb) {
          return f.number == 5 ? ParseSequence(vb, &v) : f.number == 6 ? ParseMap(vb, &v) : ParseOptional(vb, &v);
        }));
        contents = std::move(v);
        break;
      }
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  if (elem_type < 0 || elem_type > kValueOptional)
    return d_.Error("invalid optional elem_type " + std::to_string(elem_type), d_.OffsetOf(b.data), "elem_type");
  if (contents) {
    *value = std::move(*contents);
    return Status::Ok();
  }
  TypeInfo held;
  if (elem_type == kValueTensor) held = TypeInfo::Tensor(DataType::kUndefined);
  if (elem_type == kValueSequence) held = TypeInfo::Sequence(TypeInfo());
  if (elem_type == kValueOptional) held = TypeInfo::Optional(TypeInfo());
  if (elem_type == kValueMap) held = TypeInfo::Map(DataType::kUndefined, TypeInfo());
  *value = Value::None(std::move(held));
  return Status::Ok();
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

Result<Model> ReadModelBytes(std::shared_ptr<MappedFile> bytes, const ReadOptions& options) {
  if (!bytes) return InvalidArgument("ReadModelBytes: no bytes");
  OnnxParser parser(bytes, options, "model");
  Model model;
  NEE_RETURN_IF_ERROR(parser.ParseModel(parser.whole(), &model));
  NEE_RETURN_IF_ERROR(parser.CheckSuppliedTensorsUsed());
  model.mappings = parser.TakeMappings();
  return model;
}

Result<Model> ReadModelFile(const std::string& path) { return ReadModelFile(path, ReadOptions()); }

Result<Model> ReadModelFile(const std::string& path, ReadOptions options) {
  NEE_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  options.base_dir = DirName(path);
  auto model = ReadModelBytes(std::move(file), options);
  if (!model.ok()) return model.status().WithContext("'" + path + "': ");
  return model;
}

Result<Tensor> ReadTensorProto(std::shared_ptr<MappedFile> bytes) {
  if (!bytes) return InvalidArgument("ReadTensorProto: no bytes");
  OnnxParser parser(bytes, ReadOptions(), "tensor");
  Tensor tensor;
  std::string name, doc;
  NEE_RETURN_IF_ERROR(parser.ParseTensor(parser.whole(), 0, &tensor, &name, &doc));
  return tensor;
}

Result<Value> ReadValueProtoBytes(std::shared_ptr<MappedFile> bytes, const TypeInfo* expected_type) {
  if (!bytes) return InvalidArgument("ReadValueProtoBytes: no bytes");
  enum class Kind { kTensor, kSequence, kMap, kOptional };
  auto parse_as = [&](Kind kind, bool strict) -> Result<Value> {
    const char* root = kind == Kind::kTensor ? "tensor" : kind == Kind::kSequence ? "sequence"
                       : kind == Kind::kMap ? "map" : "optional";
    OnnxParser parser(bytes, ReadOptions(), root);
    parser.set_strict(strict);
    Value v;
    switch (kind) {
      case Kind::kTensor: {
        Tensor t;
        std::string name, doc;
        NEE_RETURN_IF_ERROR(parser.ParseTensor(parser.whole(), 0, &t, &name, &doc));
        v = Value(std::move(t));
        break;
      }
      case Kind::kSequence: NEE_RETURN_IF_ERROR(parser.ParseSequence(parser.whole(), &v)); break;
      case Kind::kMap: NEE_RETURN_IF_ERROR(parser.ParseMap(parser.whole(), &v)); break;
      case Kind::kOptional: NEE_RETURN_IF_ERROR(parser.ParseOptional(parser.whole(), &v)); break;
    }
    return v;
  };
  if (expected_type) {
    switch (expected_type->kind) {
      case TypeInfo::Kind::kTensor: return parse_as(Kind::kTensor, false);
      case TypeInfo::Kind::kSequence: return parse_as(Kind::kSequence, false);
      case TypeInfo::Kind::kMap: return parse_as(Kind::kMap, false);
      case TypeInfo::Kind::kOptional: return parse_as(Kind::kOptional, false);
      default:
        return NotImplemented("reading a value of type " + expected_type->ToString() + " is not supported");
    }
  }
  // No type given: the first kind that parses strictly wins.
  Result<Value> first = parse_as(Kind::kTensor, true);
  if (first.ok()) return first;
  for (Kind kind : {Kind::kSequence, Kind::kMap, Kind::kOptional}) {
    Result<Value> v = parse_as(kind, true);
    if (v.ok()) return v;
  }
  return InvalidModel("not a TensorProto, SequenceProto, MapProto or OptionalProto (as a tensor: " +
                      first.status().message() + ")");
}

Result<Value> ReadValueProtoFile(const std::string& path) {
  NEE_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  auto v = ReadValueProtoBytes(std::move(file), nullptr);
  if (!v.ok()) return v.status().WithContext("'" + path + "': ");
  return v;
}

Result<Value> ReadValueProtoFileAs(const std::string& path, const TypeInfo& expected_type) {
  NEE_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  auto v = ReadValueProtoBytes(std::move(file), &expected_type);
  if (!v.ok()) return v.status().WithContext("'" + path + "': ");
  return v;
}

}  // namespace nee
