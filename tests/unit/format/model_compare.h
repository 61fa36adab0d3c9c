// Deep comparison of IR models for round-trip tests: returns "" when equal,
// otherwise a description of the first difference.
#pragma once
#include <cstring>
#include <string>

#include "ir/graph.h"

namespace nee::testing_format {

inline std::string CompareTensors(const Tensor& a, const Tensor& b, const std::string& where) {
  if (a.dtype() != b.dtype()) return where + ": dtype " + DataTypeName(a.dtype()) + " vs " + DataTypeName(b.dtype());
  if (a.dims() != b.dims()) return where + ": dims " + DimsToString(a.dims()) + " vs " + DimsToString(b.dims());
  if (a.dtype() == DataType::kString) {
    for (int64_t i = 0; i < a.num_elements(); ++i)
      if (a.data<std::string>()[i] != b.data<std::string>()[i]) return where + ": string " + std::to_string(i);
    return "";
  }
  if (a.byte_size() > 0 && std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) != 0) return where + ": bytes differ";
  return "";
}

inline std::string CompareTypes(const TypeInfo& a, const TypeInfo& b, const std::string& where) {
  if (a.ToString() != b.ToString()) return where + ": type " + a.ToString() + " vs " + b.ToString();
  if (a.denotation != b.denotation) return where + ": denotation";
  if (a.shape.has_value() != b.shape.has_value()) return where + ": shape presence";
  if (a.shape && !(*a.shape == *b.shape)) return where + ": shape " + ShapeToString(*a.shape) + " vs " + ShapeToString(*b.shape);
  if ((a.inner == nullptr) != (b.inner == nullptr)) return where + ": inner presence";
  if (a.inner) return CompareTypes(*a.inner, *b.inner, where + ".inner");
  return "";
}

inline std::string CompareGraphs(const Graph& a, const Graph& b, const std::string& where);

inline std::string CompareSparse(const SparseTensor& a, const SparseTensor& b, const std::string& where) {
  if (a.dims != b.dims) return where + ": sparse dims";
  if (a.name != b.name) return where + ": sparse name";
  std::string d = CompareTensors(a.values, b.values, where + ".values");
  return d.empty() ? CompareTensors(a.indices, b.indices, where + ".indices") : d;
}

inline std::string CompareAttributes(const Attribute& a, const Attribute& b, const std::string& where) {
  if (a.name != b.name || a.type != b.type || a.ref_attr_name != b.ref_attr_name || a.doc_string != b.doc_string)
    return where + ": name/type/ref/doc";
  if (!a.ref_attr_name.empty()) return "";
  switch (a.type) {
    case AttrType::kFloat: return a.f == b.f ? "" : where + ": f";
    case AttrType::kInt: return a.i == b.i ? "" : where + ": i";
    case AttrType::kString: return a.s == b.s ? "" : where + ": s";
    case AttrType::kTensor: return CompareTensors(a.t, b.t, where + ".t");
    case AttrType::kGraph: return CompareGraphs(*a.g, *b.g, where + ".g");
    case AttrType::kFloats: return a.floats == b.floats ? "" : where + ": floats";
    case AttrType::kInts: return a.ints == b.ints ? "" : where + ": ints";
    case AttrType::kStrings: return a.strings == b.strings ? "" : where + ": strings";
    case AttrType::kTensors:
      if (a.tensors.size() != b.tensors.size()) return where + ": tensors count";
      for (size_t i = 0; i < a.tensors.size(); ++i) {
        std::string d = CompareTensors(a.tensors[i], b.tensors[i], where + ".tensors");
        if (!d.empty()) return d;
      }
      return "";
    case AttrType::kGraphs:
      if (a.graphs.size() != b.graphs.size()) return where + ": graphs count";
      for (size_t i = 0; i < a.graphs.size(); ++i) {
        std::string d = CompareGraphs(*a.graphs[i], *b.graphs[i], where + ".graphs");
        if (!d.empty()) return d;
      }
      return "";
    case AttrType::kSparseTensor: return CompareSparse(a.sparse_tensor, b.sparse_tensor, where);
    case AttrType::kSparseTensors:
      if (a.sparse_tensors.size() != b.sparse_tensors.size()) return where + ": sparse count";
      for (size_t i = 0; i < a.sparse_tensors.size(); ++i) {
        std::string d = CompareSparse(a.sparse_tensors[i], b.sparse_tensors[i], where);
        if (!d.empty()) return d;
      }
      return "";
    case AttrType::kTypeProto: return CompareTypes(a.tp, b.tp, where + ".tp");
    case AttrType::kTypeProtos:
      if (a.type_protos.size() != b.type_protos.size()) return where + ": type_protos count";
      for (size_t i = 0; i < a.type_protos.size(); ++i) {
        std::string d = CompareTypes(a.type_protos[i], b.type_protos[i], where + ".type_protos");
        if (!d.empty()) return d;
      }
      return "";
    case AttrType::kUndefined: return "";
  }
  return "";
}

inline std::string CompareNodes(const std::vector<Node>& a, const std::vector<Node>& b, const std::string& where) {
  if (a.size() != b.size()) return where + ": node count";
  for (size_t i = 0; i < a.size(); ++i) {
    const Node& x = a[i];
    const Node& y = b[i];
    std::string w = where + ".node[" + std::to_string(i) + "]";
    if (x.name != y.name || x.op_type != y.op_type || x.domain != y.domain || x.overload != y.overload ||
        x.doc_string != y.doc_string || x.inputs != y.inputs || x.outputs != y.outputs)
      return w + ": node fields";
    if (x.attributes.size() != y.attributes.size()) return w + ": attribute count";
    for (size_t k = 0; k < x.attributes.size(); ++k) {
      std::string d = CompareAttributes(x.attributes[k], y.attributes[k], w + ".attribute[" + std::to_string(k) + "]");
      if (!d.empty()) return d;
    }
  }
  return "";
}

inline std::string CompareValueInfos(const std::vector<ValueInfo>& a, const std::vector<ValueInfo>& b,
                                     const std::string& where) {
  if (a.size() != b.size()) return where + ": count";
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].doc_string != b[i].doc_string || a[i].metadata_props != b[i].metadata_props)
      return where + ": " + a[i].name;
    std::string d = CompareTypes(a[i].type, b[i].type, where + "." + a[i].name);
    if (!d.empty()) return d;
  }
  return "";
}

inline std::string CompareGraphs(const Graph& a, const Graph& b, const std::string& where) {
  if (a.name != b.name || a.doc_string != b.doc_string || a.metadata_props != b.metadata_props)
    return where + ": graph fields";
  std::string d = CompareNodes(a.nodes, b.nodes, where);
  if (d.empty()) d = CompareValueInfos(a.inputs, b.inputs, where + ".input");
  if (d.empty()) d = CompareValueInfos(a.outputs, b.outputs, where + ".output");
  if (d.empty()) d = CompareValueInfos(a.value_info, b.value_info, where + ".value_info");
  if (!d.empty()) return d;
  if (a.initializers.size() != b.initializers.size()) return where + ": initializer count";
  for (size_t i = 0; i < a.initializers.size(); ++i) {
    if (a.initializers[i].name != b.initializers[i].name || a.initializers[i].doc_string != b.initializers[i].doc_string)
      return where + ": initializer name";
    d = CompareTensors(a.initializers[i].tensor, b.initializers[i].tensor, where + ".initializer " + a.initializers[i].name);
    if (!d.empty()) return d;
  }
  if (a.sparse_initializers.size() != b.sparse_initializers.size()) return where + ": sparse initializer count";
  for (size_t i = 0; i < a.sparse_initializers.size(); ++i) {
    d = CompareSparse(a.sparse_initializers[i], b.sparse_initializers[i], where + ".sparse_initializer");
    if (!d.empty()) return d;
  }
  return "";
}

inline std::string CompareModels(const Model& a, const Model& b) {
  if (a.ir_version != b.ir_version || a.producer_name != b.producer_name || a.producer_version != b.producer_version ||
      a.domain != b.domain || a.model_version != b.model_version || a.doc_string != b.doc_string ||
      a.metadata_props != b.metadata_props)
    return "model fields";
  if (a.opset_imports.size() != b.opset_imports.size()) return "opset count";
  for (size_t i = 0; i < a.opset_imports.size(); ++i)
    if (a.opset_imports[i].domain != b.opset_imports[i].domain || a.opset_imports[i].version != b.opset_imports[i].version)
      return "opset " + std::to_string(i);
  if (a.functions.size() != b.functions.size()) return "function count";
  for (size_t i = 0; i < a.functions.size(); ++i) {
    const Function& f = a.functions[i];
    const Function& g = b.functions[i];
    if (f.name != g.name || f.domain != g.domain || f.overload != g.overload || f.doc_string != g.doc_string ||
        f.inputs != g.inputs || f.outputs != g.outputs || f.attribute_names != g.attribute_names ||
        f.metadata_props != g.metadata_props || f.opset_imports.size() != g.opset_imports.size() ||
        f.attribute_defaults.size() != g.attribute_defaults.size())
      return "function " + f.name;
    for (size_t k = 0; k < f.attribute_defaults.size(); ++k) {
      std::string d = CompareAttributes(f.attribute_defaults[k], g.attribute_defaults[k], "function " + f.name);
      if (!d.empty()) return d;
    }
    std::string d = CompareNodes(f.nodes, g.nodes, "function " + f.name);
    if (d.empty()) d = CompareValueInfos(f.value_info, g.value_info, "function " + f.name + ".value_info");
    if (!d.empty()) return d;
  }
  return CompareGraphs(a.graph, b.graph, "graph");
}

}  // namespace nee::testing_format
