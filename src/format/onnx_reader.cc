// The ONNX reader's ModelProto, GraphProto, NodeProto, AttributeProto,
// ValueInfoProto and FunctionProto parsing, and the model entry points. The
// parser class is declared in onnx_reader_internal.h; its tensor and type
// messages are in onnx_tensor_reader.cc, its sequence / map / optional
// messages and the value-file entry points in onnx_value_reader.cc.
#include "format/onnx_reader.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/mapped_file.h"
#include "format/onnx_reader_internal.h"

namespace nee::onnx_reader_internal {

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
constexpr FieldName kValueInfoFields[] = {
    {1, "name"}, {2, "type"}, {3, "doc_string"}, {4, "metadata_props"}};
constexpr FieldName kOpsetFields[] = {{1, "domain"}, {2, "version"}};
constexpr FieldName kEntryFields[] = {{1, "key"}, {2, "value"}};
constexpr FieldName kFunctionFields[] = {
    {1, "name"}, {4, "input"}, {5, "output"}, {6, "attribute"}, {7, "node"},
    {8, "doc_string"}, {9, "opset_import"}, {10, "domain"}, {11, "attribute_proto"},
    {12, "value_info"}, {13, "overload"}, {14, "metadata_props"}};

}  // namespace

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
      case 7: NEE_RETURN_IF_ERROR(m.AppendFloatRun(f, &attr->floats)); seen = AttrType::kFloats; break;
      case 8: NEE_RETURN_IF_ERROR(m.AppendInt64Run(f, &attr->ints)); seen = AttrType::kInts; break;
      case 9: NEE_RETURN_IF_ERROR(m.AppendStringRun(f, &attr->strings)); seen = AttrType::kStrings; break;
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

}  // namespace nee::onnx_reader_internal

namespace nee {

using onnx_reader_internal::OnnxParser;

namespace {

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

}  // namespace nee
