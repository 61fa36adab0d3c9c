// Internal to the ONNX reader (onnx_reader.cc, onnx_tensor_reader.cc,
// onnx_value_reader.cc): the parser that walks ModelProto and every message
// under it. One class, its methods defined by message family in those files,
// which are separate so that each stays small enough to read whole. Not
// installed, not exported.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mapped_file.h"
#include "format/external_data.h"
#include "format/onnx_reader.h"
#include "format/wire_decoder.h"

namespace nee::onnx_reader_internal {

using format::ByteRange;
using format::Decoder;
using format::Field;
using format::FieldName;
using format::MessageReader;
using format::PackedVarints;
using format::ScopeExit;
using format::WireType;

// Which typed TensorProto field holds a data type's values.
enum class TypedField { kNone, kFloat, kInt32, kString, kInt64, kDouble, kUint64 };

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

}  // namespace nee::onnx_reader_internal
