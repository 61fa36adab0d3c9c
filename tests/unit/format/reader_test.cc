// Tests for the ONNX protobuf reader. Fixtures come from
// make_format_fixtures.py (written with the onnx Python package); expected
// tensor bytes come from numpy (tensors_expected.txt), not from nee.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "format/onnx_reader.h"
#include "format/wire_encoder.h"
#include "format_test_util.h"

namespace nee {
namespace {

using format::ProtoEncoder;
using namespace testing_format;

const Initializer* FindInit(const Model& m, const std::string& name) { return m.graph.FindInitializer(name); }

std::string TensorBytes(const Tensor& t) {
  return std::string(static_cast<const char*>(t.raw_data()), t.byte_size());
}

bool InsideMapping(const Model& m, const void* p) {
  for (const auto& f : m.mappings)
    if (p >= f->data() && p < f->data() + f->size()) return true;
  return false;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ------------------------------------------------------------- tensors ---

TEST(FormatReader, EveryTensorTypeTypedAndRawMatchesNumpy) {
  auto model = ReadModelFile(DataPath("tensors.onnx"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::ifstream expected(DataPath("tensors_expected.txt"));
  std::string line;
  int checked = 0;
  while (std::getline(expected, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    std::string name, dims, hex;
    int dtype;
    ss >> name >> dtype >> dims >> hex;
    for (const char* suffix : {"_typed", "_raw"}) {
      SCOPED_TRACE(name + suffix);
      const Initializer* init = FindInit(*model, name + suffix);
      ASSERT_NE(init, nullptr);
      EXPECT_EQ(static_cast<int>(init->tensor.dtype()), dtype);
      EXPECT_EQ(init->tensor.dims(), ParseDims(dims));
      EXPECT_EQ(TensorBytes(init->tensor), HexToBytes(hex));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 27);
  const Initializer* strings = FindInit(*model, "strings");
  ASSERT_NE(strings, nullptr);
  ASSERT_EQ(strings->tensor.dtype(), DataType::kString);
  ASSERT_EQ(strings->tensor.num_elements(), 3);
  EXPECT_EQ(strings->tensor.data<std::string>()[0], "hello");
  EXPECT_EQ(strings->tensor.data<std::string>()[1], "");
  EXPECT_EQ(strings->tensor.data<std::string>()[2], "\xc3\xa9t\xc3\xa9");
}

TEST(FormatReader, RawDataIsAViewWhenAlignedAndACopyOtherwise) {
  auto model = ReadModelFile(DataPath("tensors.onnx"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  int views = 0;
  for (const Initializer& init : model->graph.initializers) {
    if (init.name.size() < 4 || init.name.substr(init.name.size() - 4) != "_raw") continue;
    if (init.tensor.byte_size() == 0) continue;
    bool view = InsideMapping(*model, init.tensor.raw_data());
    size_t bits = static_cast<size_t>(ElementBits(init.tensor.dtype()));
    size_t align = bits >= 64 ? 8 : bits >= 8 ? bits / 8 : 1;
    if (init.tensor.dtype() == DataType::kComplex64) align = 4;
    uintptr_t address = reinterpret_cast<uintptr_t>(init.tensor.raw_data());
    if (view) {
      ++views;
      EXPECT_EQ(address % align, 0u) << init.name;
    }
    if (align == 1) EXPECT_TRUE(view) << init.name << " (byte types never need a copy)";
  }
  EXPECT_GT(views, 0);
  EXPECT_FALSE(model->mappings.empty());
}

// A TensorProto with raw_data starting at `raw_offset` (relative to the buffer).
std::string FloatTensorWithRawAt(bool aligned) {
  ProtoEncoder e;
  e.Varint(1, 2);          // dims: 2
  e.Varint(2, 1);          // data_type: FLOAT
  if (aligned) e.Bytes(8, "");  // empty name: shifts raw_data by two bytes
  float values[2] = {1.5f, -3.0f};
  e.Bytes(9, std::string_view(reinterpret_cast<const char*>(values), 8));
  return e.Take();
}

TEST(FormatReader, StandaloneTensorZeroCopyAlignment) {
  // Header bytes: 08 02 10 01 [42 00] 4a 08 -> raw at offset 6 (unaligned) or 8 (aligned).
  for (bool aligned : {true, false}) {
    auto bytes = Bytes(FloatTensorWithRawAt(aligned));
    auto t = ReadTensorProto(bytes);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->dims(), std::vector<int64_t>({2}));
    EXPECT_EQ(t->data<float>()[0], 1.5f);
    EXPECT_EQ(t->data<float>()[1], -3.0f);
    bool inside = t->raw_data() >= bytes->data() && t->raw_data() < bytes->data() + bytes->size();
    EXPECT_EQ(inside, aligned);
    if (aligned) EXPECT_EQ(t->raw_data(), bytes->data() + 8);
  }
}

TEST(FormatReader, ViewKeepsTheMappingAlive) {
  Tensor t;
  {
    auto bytes = Bytes(FloatTensorWithRawAt(true));
    auto r = ReadTensorProto(bytes);
    ASSERT_TRUE(r.ok());
    t = r.value();
  }  // the caller's shared_ptr is gone; the tensor still owns the bytes
  EXPECT_EQ(t.data<float>()[1], -3.0f);
}

TEST(FormatReader, UnpackedAndPackedRepeatedScalarsAreBothAccepted) {
  ProtoEncoder e;
  e.Varint(1, 3);  // dims unpacked
  e.Varint(2, static_cast<uint64_t>(DataType::kInt64));
  e.Int64(7, -1);  // int64_data unpacked
  ProtoEncoder packed;
  packed.RawVarint(5);
  packed.RawVarint(static_cast<uint64_t>(int64_t{-300}));
  e.Bytes(7, packed.bytes());  // the rest packed
  auto t = ReadTensorProto(Bytes(e.bytes()));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->span<int64_t>()[0], -1);
  EXPECT_EQ(t->span<int64_t>()[1], 5);
  EXPECT_EQ(t->span<int64_t>()[2], -300);

  ProtoEncoder f;
  ProtoEncoder dims;
  dims.RawVarint(1);
  dims.RawVarint(2);
  f.Bytes(1, dims.bytes());  // packed dims [1, 2]
  f.Varint(2, 1);
  f.Float(4, 0.25f);  // float_data unpacked
  f.Float(4, -8.0f);
  auto ft = ReadTensorProto(Bytes(f.bytes()));
  ASSERT_TRUE(ft.ok()) << ft.status().ToString();
  EXPECT_EQ(ft->dims(), std::vector<int64_t>({1, 2}));
  EXPECT_EQ(ft->data<float>()[0], 0.25f);
  EXPECT_EQ(ft->data<float>()[1], -8.0f);
}

TEST(FormatReader, CountMismatchAndBadTypesAreErrors) {
  struct Case {
    const char* what;
    std::string bytes;
    const char* expect;
  };
  std::vector<Case> cases;
  {
    ProtoEncoder e;  // dims [3] but raw_data has 8 bytes
    e.Varint(1, 3);
    e.Varint(2, 1);
    e.Bytes(9, std::string(8, '\0'));
    cases.push_back({"raw size", e.Take(), "raw_data has 8 bytes, expected 12"});
  }
  {
    ProtoEncoder e;  // invalid data type
    e.Varint(1, 1);
    e.Varint(2, 99);
    e.Bytes(9, std::string(4, '\0'));
    cases.push_back({"bad type", e.Take(), "unsupported data_type 99"});
  }
  {
    ProtoEncoder e;  // no data type
    e.Varint(1, 1);
    cases.push_back({"no type", e.Take(), "data_type is not set"});
  }
  {
    ProtoEncoder e;  // huge dims, tiny raw data: must fail before allocating
    e.Varint(1, int64_t{1} << 40);
    e.Varint(1, int64_t{1} << 40);
    e.Varint(2, 1);
    e.Bytes(9, std::string(4, '\0'));
    cases.push_back({"huge dims", e.Take(), "dims"});
  }
  {
    ProtoEncoder e;  // huge dims with a typed field (16 GiB: just within the default max_tensor_bytes)
    e.Varint(1, int64_t{1} << 31);
    e.Varint(2, 7);
    e.Int64(7, 1);
    cases.push_back({"huge typed", e.Take(), "int64_data has 1 values, expected 2147483648"});
  }
  {
    ProtoEncoder e;  // one element more than max_tensor_bytes allows
    e.Varint(1, (int64_t{1} << 31) + 1);
    e.Varint(2, 7);
    e.Int64(7, 1);
    cases.push_back({"over the limit", e.Take(), "limit of 17179869184 bytes per tensor"});
  }
  {
    ProtoEncoder e;  // negative dim
    e.Int64(1, -2);
    e.Varint(2, 1);
    cases.push_back({"negative", e.Take(), "negative dimension"});
  }
  {
    ProtoEncoder e;  // elements but no data
    e.Varint(1, 4);
    e.Varint(2, 1);
    cases.push_back({"no data", e.Take(), "no data for 4 elements"});
  }
  {
    ProtoEncoder e;  // wrong typed field for the type
    e.Varint(1, 1);
    e.Varint(2, 7);
    e.Float(4, 1.0f);
    cases.push_back({"wrong field", e.Take(), "float_data cannot hold int64"});
  }
  {
    ProtoEncoder e;  // external data in a standalone tensor (no base_dir)
    e.Varint(1, 1);
    e.Varint(2, 1);
    ProtoEncoder entry;
    entry.Bytes(1, "location");
    entry.Bytes(2, "w.bin");
    e.Bytes(13, entry.bytes());
    e.Varint(14, 1);
    cases.push_back({"external", e.Take(), "no base_dir"});
  }
  {
    ProtoEncoder e;  // packed float run not a multiple of 4
    e.Varint(1, 1);
    e.Varint(2, 1);
    e.Bytes(4, "abcde");
    cases.push_back({"packed size", e.Take(), "not a multiple of 4"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto t = ReadTensorProto(Bytes(c.bytes));
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidModel);
    EXPECT_TRUE(Contains(t.status().message(), c.expect)) << t.status().message();
    EXPECT_TRUE(Contains(t.status().message(), "byte offset")) << t.status().message();
  }
}

// ----------------------------------------------------------- attributes ---

const Attribute* Attr(const Node& n, const std::string& name) {
  const Attribute* a = n.FindAttr(name);
  EXPECT_NE(a, nullptr) << name;
  return a;
}

TEST(FormatReader, EveryAttributeKind) {
  auto model = ReadModelFile(DataPath("attributes.onnx"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_EQ(model->graph.nodes.size(), 1u);
  const Node& n = model->graph.nodes[0];
  EXPECT_EQ(n.name, "all_attrs");
  EXPECT_EQ(n.op_type, "AllAttrs");
  EXPECT_EQ(n.domain, "test.domain");
  EXPECT_EQ(n.doc_string, "node doc");
  EXPECT_EQ(n.inputs, std::vector<std::string>({"x"}));
  EXPECT_EQ(n.outputs, std::vector<std::string>({"y"}));

  const Attribute* a;
  ASSERT_TRUE((a = Attr(n, "f")));
  EXPECT_EQ(a->type, AttrType::kFloat);
  EXPECT_EQ(a->f, 0.5f);
  ASSERT_TRUE((a = Attr(n, "i")));
  EXPECT_EQ(a->type, AttrType::kInt);
  EXPECT_EQ(a->i, -3);
  ASSERT_TRUE((a = Attr(n, "s")));
  EXPECT_EQ(a->type, AttrType::kString);
  EXPECT_EQ(a->s, "text");
  ASSERT_TRUE((a = Attr(n, "t")));
  EXPECT_EQ(a->type, AttrType::kTensor);
  ASSERT_EQ(a->t.dtype(), DataType::kInt32);
  EXPECT_EQ(a->t.dims(), std::vector<int64_t>({2, 2}));
  EXPECT_EQ(a->t.data<int32_t>()[3], 4);
  ASSERT_TRUE((a = Attr(n, "g")));
  EXPECT_EQ(a->type, AttrType::kGraph);
  ASSERT_NE(a->g, nullptr);
  EXPECT_EQ(a->g->name, "body");
  ASSERT_EQ(a->g->nodes.size(), 1u);
  EXPECT_EQ(a->g->nodes[0].op_type, "Neg");
  ASSERT_TRUE((a = Attr(n, "floats")));
  EXPECT_EQ(a->type, AttrType::kFloats);
  EXPECT_EQ(a->floats, std::vector<float>({1.0f, 2.5f}));
  ASSERT_TRUE((a = Attr(n, "ints")));
  EXPECT_EQ(a->type, AttrType::kInts);
  EXPECT_EQ(a->ints, std::vector<int64_t>({-1, 0, 300000000000}));
  ASSERT_TRUE((a = Attr(n, "strings")));
  EXPECT_EQ(a->type, AttrType::kStrings);
  EXPECT_EQ(a->strings, std::vector<std::string>({"a", "bc"}));
  ASSERT_TRUE((a = Attr(n, "tensors")));
  EXPECT_EQ(a->type, AttrType::kTensors);
  ASSERT_EQ(a->tensors.size(), 2u);
  EXPECT_EQ(a->tensors[1].dtype(), DataType::kFloat);
  EXPECT_EQ(a->tensors[1].data<float>()[0], 0.25f);
  ASSERT_TRUE((a = Attr(n, "graphs")));
  EXPECT_EQ(a->type, AttrType::kGraphs);
  ASSERT_EQ(a->graphs.size(), 2u);
  EXPECT_EQ(a->graphs[1]->name, "body2");
  EXPECT_EQ(a->graphs[1]->inputs[0].type.elem_type, DataType::kInt64);
  EXPECT_FALSE(a->graphs[1]->inputs[0].type.shape.has_value());
  ASSERT_TRUE((a = Attr(n, "sp")));
  EXPECT_EQ(a->type, AttrType::kSparseTensor);
  EXPECT_EQ(a->sparse_tensor.dims, std::vector<int64_t>({4}));
  EXPECT_EQ(a->sparse_tensor.values.data<float>()[1], 6.0f);
  EXPECT_EQ(a->sparse_tensor.indices.data<int64_t>()[1], 3);
  auto dense = DensifySparse(a->sparse_tensor);
  ASSERT_TRUE(dense.ok()) << dense.status().ToString();
  EXPECT_EQ(dense->data<float>()[3], 6.0f);
  ASSERT_TRUE((a = Attr(n, "sps")));
  EXPECT_EQ(a->type, AttrType::kSparseTensors);
  ASSERT_EQ(a->sparse_tensors.size(), 2u);
  EXPECT_EQ(a->sparse_tensors[1].indices.dims(), std::vector<int64_t>({1, 2}));
  ASSERT_TRUE((a = Attr(n, "tp")));
  EXPECT_EQ(a->type, AttrType::kTypeProto);
  EXPECT_EQ(a->tp.ToString(), "tensor(float)");
  ASSERT_TRUE(a->tp.shape.has_value());
  EXPECT_EQ(ShapeToString(*a->tp.shape), "[N,3]");
  ASSERT_TRUE((a = Attr(n, "tps")));
  EXPECT_EQ(a->type, AttrType::kTypeProtos);
  ASSERT_EQ(a->type_protos.size(), 2u);
  EXPECT_EQ(a->type_protos[1].ToString(), "seq(tensor(int64))");
  ASSERT_TRUE((a = Attr(n, "empty_ints")));
  EXPECT_EQ(a->type, AttrType::kInts);
  EXPECT_TRUE(a->ints.empty());
}

// ---------------------------------------------------------------- types ---

TEST(FormatReader, ValueInfoTypesAndSymbolicDims) {
  auto model = ReadModelFile(DataPath("types.onnx"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::map<std::string, const ValueInfo*> by_name;
  for (const ValueInfo& v : model->graph.inputs) by_name[v.name] = &v;
  ASSERT_EQ(by_name.size(), 9u);
  const ValueInfo* sym = by_name["sym"];
  EXPECT_EQ(sym->doc_string, "symbolic");
  ASSERT_TRUE(sym->type.shape.has_value());
  const Shape& s = *sym->type.shape;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0], Dim::Symbol("batch"));
  EXPECT_EQ(s[1], Dim::Known(3));
  EXPECT_FALSE(s[2].known());
  EXPECT_TRUE(s[2].symbol.empty());
  EXPECT_EQ(s[3], Dim::Symbol("seq"));
  ASSERT_TRUE(by_name["scalar"]->type.shape.has_value());
  EXPECT_TRUE(by_name["scalar"]->type.shape->empty());
  EXPECT_FALSE(by_name["unranked"]->type.shape.has_value());
  EXPECT_EQ(by_name["seq"]->type.ToString(), "seq(tensor(float))");
  EXPECT_EQ(by_name["map"]->type.ToString(), "map(string,tensor(int64))");
  EXPECT_EQ(by_name["opt"]->type.ToString(), "optional(tensor(uint8))");
  EXPECT_EQ(by_name["opt_seq"]->type.ToString(), "optional(seq(tensor(bool)))");
  EXPECT_EQ(by_name["sparse"]->type.kind, TypeInfo::Kind::kSparseTensor);
  EXPECT_EQ(by_name["sparse"]->type.elem_type, DataType::kFloat);
  EXPECT_EQ(ShapeToString(*by_name["sparse"]->type.shape), "[10,20]");
  EXPECT_EQ(by_name["image"]->type.denotation, "IMAGE");
  ASSERT_EQ(model->graph.value_info.size(), 1u);
  EXPECT_EQ(model->graph.value_info[0].type.elem_type, DataType::kFloat16);
  EXPECT_EQ(ShapeToString(*model->graph.outputs[0].type.shape), "[batch]");
}

// ------------------------------------------------- functions and metadata ---

TEST(FormatReader, FunctionsAndMetadata) {
  auto model = ReadModelFile(DataPath("functions.onnx"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->producer_name, "nee-fixtures");
  EXPECT_EQ(model->producer_version, "1.2");
  EXPECT_EQ(model->domain, "org.nee.test");
  EXPECT_EQ(model->model_version, 7);
  EXPECT_EQ(model->doc_string, "model doc");
  EXPECT_GE(model->ir_version, 10);
  EXPECT_EQ(model->OpsetVersion(""), 21);
  EXPECT_EQ(model->OpsetVersion("custom.fn"), 1);
  std::map<std::string, std::string> props(model->metadata_props.begin(), model->metadata_props.end());
  EXPECT_EQ(props["author"], "nee");
  EXPECT_EQ(props["license"], "MIT");
  EXPECT_EQ(model->graph.doc_string, "graph doc");
  ASSERT_EQ(model->graph.metadata_props.size(), 1u);
  EXPECT_EQ(model->graph.metadata_props[0].second, "graph_value");

  ASSERT_EQ(model->functions.size(), 1u);
  const Function& fn = model->functions[0];
  EXPECT_EQ(fn.name, "Scale");
  EXPECT_EQ(fn.domain, "custom.fn");
  EXPECT_EQ(fn.doc_string, "scales X");
  EXPECT_EQ(fn.inputs, std::vector<std::string>({"X"}));
  EXPECT_EQ(fn.outputs, std::vector<std::string>({"Y"}));
  EXPECT_EQ(fn.attribute_names, std::vector<std::string>({"alpha"}));
  ASSERT_EQ(fn.attribute_defaults.size(), 1u);
  EXPECT_EQ(fn.attribute_defaults[0].name, "beta");
  EXPECT_EQ(fn.attribute_defaults[0].i, 2);
  ASSERT_EQ(fn.opset_imports.size(), 1u);
  EXPECT_EQ(fn.opset_imports[0].version, 21);
  ASSERT_EQ(fn.nodes.size(), 2u);
  ASSERT_EQ(fn.nodes[0].attributes.size(), 1u);
  EXPECT_EQ(fn.nodes[0].attributes[0].name, "value_float");
  EXPECT_EQ(fn.nodes[0].attributes[0].ref_attr_name, "alpha");
  EXPECT_EQ(fn.nodes[0].attributes[0].type, AttrType::kFloat);
  ASSERT_EQ(fn.metadata_props.size(), 1u);
  EXPECT_EQ(fn.metadata_props[0].first, "fn_key");
  EXPECT_NE(model->FindFunction("custom.fn", "Scale"), nullptr);
}

// --------------------------------------------------------- external data ---

TEST(FormatReader, ExternalDataIsMappedAndViewed) {
  auto model = ReadModelFile(DataPath("external/model.onnx"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Initializer* w = FindInit(*model, "w_big");
  const Initializer* b = FindInit(*model, "b_small");
  ASSERT_TRUE(w && b);
  ASSERT_EQ(w->tensor.num_elements(), 1024);
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(w->tensor.data<float>()[i], static_cast<float>(i));
  EXPECT_EQ(b->tensor.data<int64_t>()[2], 3);
  // Both live at 4096-aligned offsets of weights.bin: views into its mapping.
  EXPECT_TRUE(InsideMapping(*model, w->tensor.raw_data()));
  EXPECT_TRUE(InsideMapping(*model, b->tensor.raw_data()));
  int weight_mappings = 0;
  for (const auto& m : model->mappings) weight_mappings += Contains(m->path(), "weights.bin");
  EXPECT_EQ(weight_mappings, 1);  // one mapping shared by both tensors
}

TEST(FormatReader, ExternalDataNeedsABaseDir) {
  auto bytes = MappedFile::Open(DataPath("external/model.onnx"));
  ASSERT_TRUE(bytes.ok());
  auto model = ReadModelBytes(bytes.value(), ReadOptions());
  ASSERT_FALSE(model.ok());
  EXPECT_TRUE(Contains(model.status().message(), "no base_dir")) << model.status().message();
  EXPECT_TRUE(Contains(model.status().message(), "w_big")) << model.status().message();
}

TEST(FormatReader, HostileExternalPathsAreRefused) {
  struct Case {
    const char* file;
    const char* expect;
  };
  for (const Case& c : {Case{"dotdot.onnx", "'..'"}, Case{"dotdot_inner.onnx", "'..'"},
                        Case{"absolute.onnx", "absolute"}, Case{"missing.onnx", "no_such_file.bin"},
                        Case{"bad_offset.onnx", "past the end"}}) {
    SCOPED_TRACE(c.file);
    auto model = ReadModelFile(DataPath(std::string("external/") + c.file));
    ASSERT_FALSE(model.ok());
    EXPECT_TRUE(Contains(model.status().message(), c.expect)) << model.status().message();
    EXPECT_TRUE(Contains(model.status().message(), "tensor '")) << model.status().message();
  }
}

TEST(FormatReader, SymlinkEscapingTheModelFolderIsRefused) {
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  std::filesystem::create_directories(tmp / "model");
  std::filesystem::create_directories(tmp / "outside");
  WriteFileBytes(tmp / "outside/outside.bin", std::string(16, '\x01'));
  std::filesystem::copy_file(DataPath("external/symlink.onnx"), tmp / "model/model.onnx");
  std::filesystem::create_directory_symlink(tmp / "outside", tmp / "model/link_dir");
  auto model = ReadModelFile(tmp / "model/model.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_TRUE(Contains(model.status().message(), "outside the model folder")) << model.status().message();
  EXPECT_TRUE(Contains(model.status().message(), "evil")) << model.status().message();

  // The same layout with a symlink that stays inside the folder is fine.
  std::filesystem::remove(tmp / "model/link_dir");
  std::filesystem::create_directories(tmp / "model/real_dir");
  WriteFileBytes(tmp / "model/real_dir/outside.bin", std::string(16, '\0'));
  std::filesystem::create_directory_symlink(tmp / "model/real_dir", tmp / "model/link_dir");
  auto inside = ReadModelFile(tmp / "model/model.onnx");
  ASSERT_TRUE(inside.ok()) << inside.status().ToString();
  EXPECT_EQ(inside->graph.initializers[0].tensor.num_elements(), 4);
}

// ---------------------------------------------------------- value files ---

TEST(FormatReader, ValueProtoFilesOfEveryKind) {
  auto t = ReadValueProtoFile(DataPath("values/tensor.pb"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE(t->is_tensor());
  EXPECT_EQ(t->tensor().dims(), std::vector<int64_t>({2, 2}));
  EXPECT_EQ(t->tensor().data<float>()[3], 4.0f);

  auto st = ReadValueProtoFile(DataPath("values/string_tensor.pb"));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ASSERT_TRUE(st->is_tensor());
  EXPECT_EQ(st->tensor().data<std::string>()[0], "ab");

  auto seq = ReadValueProtoFile(DataPath("values/sequence.pb"));
  ASSERT_TRUE(seq.ok()) << seq.status().ToString();
  ASSERT_TRUE(seq->is_sequence());
  ASSERT_EQ(seq->elements().size(), 2u);
  EXPECT_EQ(seq->elements()[1].tensor().data<int64_t>()[0], 3);
  EXPECT_EQ(seq->element_type().elem_type, DataType::kInt64);

  auto empty_seq = ReadValueProtoFile(DataPath("values/empty_sequence.pb"));
  ASSERT_TRUE(empty_seq.ok()) << empty_seq.status().ToString();
  ASSERT_TRUE(empty_seq->is_sequence());
  EXPECT_TRUE(empty_seq->elements().empty());

  auto map = ReadValueProtoFile(DataPath("values/map_int.pb"));
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_TRUE(map->is_map());
  ASSERT_EQ(map->map_keys().dtype(), DataType::kInt64);
  EXPECT_EQ(map->map_keys().data<int64_t>()[1], 7);
  ASSERT_EQ(map->map_values().dtype(), DataType::kFloat);
  EXPECT_EQ(map->map_values().data<float>()[1], -1.5f);

  auto smap = ReadValueProtoFile(DataPath("values/map_string.pb"));
  ASSERT_TRUE(smap.ok()) << smap.status().ToString();
  ASSERT_TRUE(smap->is_map());
  EXPECT_EQ(smap->map_keys().data<std::string>()[1], "b");
  EXPECT_EQ(smap->map_values().data<int64_t>()[1], 4);

  // With the type known (as the conformance harness knows it from the model).
  TypeInfo opt_tensor = TypeInfo::Optional(TypeInfo::Tensor(DataType::kInt32));
  auto opt = ReadValueProtoFileAs(DataPath("values/optional_tensor.pb"), opt_tensor);
  ASSERT_TRUE(opt.ok()) << opt.status().ToString();
  ASSERT_TRUE(opt->is_tensor());
  EXPECT_EQ(opt->tensor().data<int32_t>()[2], 7);

  auto none = ReadValueProtoFileAs(DataPath("values/optional_empty.pb"), opt_tensor);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->is_none());

  // Without the type, an optional holding a sequence has the same bytes as a
  // sequence holding one sequence; the reader prefers the sequence.
  auto ambiguous = ReadValueProtoFile(DataPath("values/optional_sequence.pb"));
  ASSERT_TRUE(ambiguous.ok()) << ambiguous.status().ToString();
  ASSERT_TRUE(ambiguous->is_sequence());
  ASSERT_EQ(ambiguous->elements().size(), 1u);
  EXPECT_TRUE(ambiguous->elements()[0].is_sequence());
  auto opt_seq = ReadValueProtoFileAs(DataPath("values/optional_sequence.pb"),
                                      TypeInfo::Optional(TypeInfo::Sequence(TypeInfo::Tensor(DataType::kFloat))));
  ASSERT_TRUE(opt_seq.ok()) << opt_seq.status().ToString();
  ASSERT_TRUE(opt_seq->is_sequence());
  ASSERT_EQ(opt_seq->elements().size(), 2u);
  EXPECT_EQ(opt_seq->elements()[1].tensor().data<float>()[1], 3.0f);

  auto wrong = ReadValueProtoFileAs(DataPath("values/tensor.pb"), TypeInfo::Sequence(TypeInfo()));
  EXPECT_FALSE(wrong.ok());
}

// ------------------------------------------------------------ malformed ---

TEST(FormatReader, ErrorsNameTheFieldPathAndOffset) {
  // A model whose only node has a tensor attribute with truncated raw_data.
  ProtoEncoder tensor;
  tensor.Varint(1, 4);
  tensor.Varint(2, 1);
  tensor.Tag(9, ProtoEncoder::kLen);
  tensor.RawVarint(16);
  tensor.Append("short");  // 5 of the 16 bytes
  ProtoEncoder attr;
  attr.Bytes(1, "value");
  attr.Varint(20, 4);
  attr.Bytes(5, tensor.bytes());
  ProtoEncoder node0, node1;
  node0.Bytes(4, "Relu");
  node1.Bytes(4, "Constant");
  node1.Bytes(5, attr.bytes());
  ProtoEncoder graph;
  graph.Bytes(1, node0.bytes());
  graph.Bytes(1, node1.bytes());
  ProtoEncoder model;
  model.Varint(1, 8);
  model.Bytes(7, graph.bytes());
  auto m = ReadModelBytes(Bytes(model.bytes()), ReadOptions());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidModel);
  EXPECT_TRUE(Contains(m.status().message(), "truncated length-delimited field")) << m.status().message();
  EXPECT_TRUE(Contains(m.status().message(), "at graph.node[1].attribute[0].t.raw_data (byte offset "))
      << m.status().message();
}

TEST(FormatReader, UnknownFieldsOfEveryWireTypeAreSkipped) {
  auto small = ReadFileBytes(DataPath("small.onnx"));
  ProtoEncoder extra;
  extra.Varint(1000, 12345);
  extra.Fixed64(1001, 7);
  extra.Fixed32(1002, 9);
  extra.Bytes(1003, "ignored");
  extra.Tag(1004, ProtoEncoder::kStartGroup);
  extra.Varint(1, 1);
  extra.Tag(2, ProtoEncoder::kStartGroup);  // nested group
  extra.Bytes(3, "x");
  extra.Tag(2, ProtoEncoder::kEndGroup);
  extra.Tag(1004, ProtoEncoder::kEndGroup);
  auto with_extra = ReadModelBytes(Bytes(extra.bytes() + small), ReadOptions());
  ASSERT_TRUE(with_extra.ok()) << with_extra.status().ToString();
  EXPECT_EQ(with_extra->graph.nodes.size(), 4u);

  ProtoEncoder bad;
  bad.Tag(1004, ProtoEncoder::kStartGroup);
  bad.Tag(1005, ProtoEncoder::kEndGroup);  // mismatched
  auto mismatched = ReadModelBytes(Bytes(bad.bytes() + small), ReadOptions());
  ASSERT_FALSE(mismatched.ok());
  EXPECT_TRUE(Contains(mismatched.status().message(), "mismatched end-group")) << mismatched.status().message();

  ProtoEncoder wrong_wire;
  wrong_wire.Varint(7, 1);  // graph as a varint
  auto ww = ReadModelBytes(Bytes(wrong_wire.bytes()), ReadOptions());
  ASSERT_FALSE(ww.ok());
  EXPECT_TRUE(Contains(ww.status().message(), "at graph")) << ww.status().message();
}

TEST(FormatReader, SmallModelReadsCompletely) {
  auto model = ReadModelFile(DataPath("small.onnx"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_EQ(model->graph.nodes.size(), 4u);
  const Node& if_node = model->graph.nodes[3];
  EXPECT_EQ(if_node.op_type, "If");
  auto then_graph = if_node.GetGraph("then_branch");
  ASSERT_TRUE(then_graph.ok());
  EXPECT_EQ(then_graph.value()->nodes[0].op_type, "Relu");
  const Initializer* w = FindInit(*model, "w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->tensor.data<float>()[5], 2.5f);
  auto keepdims = model->graph.nodes[1].GetInt("keepdims");
  ASSERT_TRUE(keepdims.ok());
  EXPECT_EQ(keepdims.value(), 0);
}

TEST(FormatReader, EveryTruncatedPrefixFailsCleanly) {
  std::string bytes = ReadFileBytes(DataPath("small.onnx"));
  ASSERT_GT(bytes.size(), 100u);
  int ok = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto m = ReadModelBytes(Bytes(bytes.substr(0, n)), ReadOptions());
    if (m.ok()) {
      ++ok;  // a prefix ending exactly at a field boundary after the graph is a valid model
      continue;
    }
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidModel) << n << ": " << m.status().ToString();
  }
  EXPECT_LT(ok, 10);
  // The truncated-tensor files are rejected too.
  std::string tensor = ReadFileBytes(DataPath("values/tensor.pb"));
  for (size_t n = 0; n < tensor.size(); ++n) EXPECT_FALSE(ReadTensorProto(Bytes(tensor.substr(0, n))).ok()) << n;
}

TEST(FormatReader, BitFlipsNeverCrash) {
  std::string bytes = ReadFileBytes(DataPath("small.onnx"));
  int failures = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      auto m = ReadModelBytes(Bytes(flipped), ReadOptions());
      if (!m.ok()) {
        ++failures;
        ASSERT_FALSE(m.status().message().empty());
      }
    }
  }
  EXPECT_GT(failures, 0);
}

TEST(FormatReader, RandomBytesNeverCrash) {
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    size_t size = rng() % 300;
    std::string bytes(size, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    auto m = ReadModelBytes(Bytes(bytes), ReadOptions());
    accepted += m.ok();
    auto v = ReadValueProtoBytes(Bytes(bytes), nullptr);
    (void)v;
  }
  // Random bytes practically never form a model with a graph.
  EXPECT_LT(accepted, 30);
}

TEST(FormatReader, DeepNestingIsLimited) {
  // Graph -> node -> attribute -> g -> node -> ... 40 levels of subgraphs.
  std::string graph;
  {
    ProtoEncoder leaf;
    leaf.Bytes(2, "leaf");
    graph = leaf.Take();
  }
  for (int level = 0; level < 40; ++level) {
    ProtoEncoder attr;
    attr.Bytes(1, "body");
    attr.Varint(20, 5);
    attr.Bytes(6, graph);
    ProtoEncoder node;
    node.Bytes(4, "Loop");
    node.Bytes(5, attr.bytes());
    ProtoEncoder g;
    g.Bytes(1, node.bytes());
    graph = g.Take();
  }
  ProtoEncoder model;
  model.Bytes(7, graph);
  auto m = ReadModelBytes(Bytes(model.bytes()), ReadOptions());
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Contains(m.status().message(), "nested deeper than 64")) << m.status().message();
  ReadOptions deep;
  deep.max_depth = 200;
  auto ok = ReadModelBytes(Bytes(model.bytes()), deep);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

// A model of one node whose attributes are the given AttributeProto bytes.
std::string ModelWithAttributes(const std::vector<std::string>& attributes) {
  ProtoEncoder node;
  node.Bytes(4, "TreeLike");
  for (const std::string& a : attributes) node.Bytes(5, a);
  ProtoEncoder graph;
  graph.Bytes(1, node.bytes());
  ProtoEncoder model;
  model.Varint(1, 8);  // ir_version
  model.Bytes(7, graph.bytes());
  return model.bytes();
}

// The unpacked runs the reader takes without a Next per element (AppendInt64Run and friends): long runs
// with varints of every length, runs cut by other fields and resumed (one attribute's values in two runs),
// a packed block in the middle, and strings of any length; the values are the ones encoded here.
TEST(FormatReader, UnpackedAttributeRunsReadEveryElement) {
  std::vector<int64_t> ints;
  for (int64_t i = 0; i < 3000; ++i) ints.push_back(i % 7 == 0 ? -i * 1000003 : (i << (i % 50)) / 3);
  std::vector<float> floats;
  for (int i = 0; i < 1000; ++i) floats.push_back(0.5f * static_cast<float>(i) - 3.25f);
  std::vector<std::string> strings;
  for (int i = 0; i < 500; ++i) strings.push_back(std::string(static_cast<size_t>(i % 40), static_cast<char>('a' + i % 26)));

  ProtoEncoder a_ints;
  a_ints.Bytes(1, "ints");
  for (size_t i = 0; i < 1000; ++i) a_ints.Int64(8, ints[i]);
  a_ints.Varint(20, static_cast<uint64_t>(AttrType::kInts));  // another field cuts the run
  ProtoEncoder packed;
  for (size_t i = 1000; i < 1500; ++i) packed.RawVarint(static_cast<uint64_t>(ints[i]));
  a_ints.Bytes(8, packed.bytes());  // a packed block
  for (size_t i = 1500; i < ints.size(); ++i) a_ints.Int64(8, ints[i]);
  ProtoEncoder a_floats;
  for (size_t i = 0; i < 600; ++i) a_floats.Float(7, floats[i]);
  a_floats.Bytes(1, "floats");  // the name between two runs
  for (size_t i = 600; i < floats.size(); ++i) a_floats.Float(7, floats[i]);
  a_floats.Varint(20, static_cast<uint64_t>(AttrType::kFloats));
  ProtoEncoder a_strings;
  a_strings.Bytes(1, "strings");
  for (const std::string& s : strings) a_strings.Bytes(9, s);
  a_strings.Varint(20, static_cast<uint64_t>(AttrType::kStrings));

  auto model = ReadModelBytes(Bytes(ModelWithAttributes({a_ints.bytes(), a_floats.bytes(), a_strings.bytes()})),
                              ReadOptions());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Node& n = model->graph.nodes.at(0);
  const Attribute* a;
  ASSERT_TRUE((a = Attr(n, "ints")));
  EXPECT_EQ(a->type, AttrType::kInts);
  EXPECT_EQ(a->ints, ints);
  ASSERT_TRUE((a = Attr(n, "floats")));
  EXPECT_EQ(a->type, AttrType::kFloats);
  EXPECT_EQ(a->floats, floats);
  ASSERT_TRUE((a = Attr(n, "strings")));
  EXPECT_EQ(a->type, AttrType::kStrings);
  EXPECT_EQ(a->strings, strings);
}

// An element that does not decode ends the run where it starts, and the general reader reports it at its
// own offset, as without runs: a truncated varint, a fixed32 cut short, a string longer than what is left.
TEST(FormatReader, MalformedElementInsideARunIsReportedAtItsOffset) {
  struct Case {
    const char* what;
    uint32_t field;
    std::string last_element;  // raw bytes after the tag
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"truncated varint", 8, "\xff\xff", "truncated varint"},
      {"fixed32 cut short", 7, "\x01\x02", "truncated fixed32"},
      {"string past the end", 9, "\x20\x61", "truncated length-delimited field"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ProtoEncoder a;
    a.Bytes(1, "x");
    a.Varint(20, static_cast<uint64_t>(c.field == 8 ? AttrType::kInts : c.field == 7 ? AttrType::kFloats : AttrType::kStrings));
    for (int i = 0; i < 5; ++i) {
      if (c.field == 8) a.Int64(8, 300 + i);
      if (c.field == 7) a.Float(7, 1.5f);
      if (c.field == 9) a.Bytes(9, "abc");
    }
    const size_t bad_in_attribute = a.bytes().size();
    a.Tag(c.field, c.field == 8 ? 0 : c.field == 7 ? 5 : 2);
    a.Append(c.last_element);
    // The attribute is the last field of the node, the node of the graph, the graph of the model: the
    // malformed element is the file's last bytes, the attribute's own bytes start that many before the end.
    const std::string bytes = ModelWithAttributes({a.bytes()});
    const size_t bad_offset = bytes.size() - (a.bytes().size() - bad_in_attribute);
    auto m = ReadModelBytes(Bytes(bytes), ReadOptions());
    ASSERT_FALSE(m.ok());
    EXPECT_TRUE(Contains(m.status().message(), c.expect)) << m.status().message();
    EXPECT_TRUE(Contains(m.status().message(), "attribute")) << m.status().message();
    EXPECT_TRUE(Contains(m.status().message(), "byte offset " + std::to_string(bad_offset)) ||
                Contains(m.status().message(), "byte offset " + std::to_string(bad_offset + 1)))
        << m.status().message();
  }
}

TEST(FormatReader, MalformedVarintsAndLengths) {
  struct Case {
    const char* what;
    std::string bytes;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"varint over 10 bytes", std::string("\x08") + std::string(10, '\xff') + "\x01", "ir_version"},
      {"length beyond end", std::string("\x3a\xff\xff\xff\xff\x0f"), "truncated length-delimited field"},
      {"field number zero", std::string("\x00\x01", 2), "invalid field number 0"},
      {"wire type 7", std::string("\x0f"), "invalid wire type 7"},
      {"stray end group", std::string("\x0c"), "unexpected end-group"},
      {"unterminated group", std::string("\x0b\x08\x01"), "unterminated group"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto m = ReadModelBytes(Bytes(c.bytes), ReadOptions());
    ASSERT_FALSE(m.ok());
    EXPECT_TRUE(Contains(m.status().message(), c.expect)) << m.status().message();
    EXPECT_TRUE(Contains(m.status().message(), "byte offset")) << m.status().message();
  }
}

TEST(FormatReader, MissingFileIsAnIoError) {
  auto m = ReadModelFile(DataPath("does_not_exist.onnx"));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kIo);
}

}  // namespace
}  // namespace nee
