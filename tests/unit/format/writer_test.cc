// Tests for the ONNX writer: fixtures read -> serialized -> read again must be
// equal; protobuf-written fixtures whose content the IR keeps completely must
// serialize to the very same bytes onnx/protobuf wrote; external data layout.
//
// Models that the Python check (check_written_models.py) validates with
// onnx.checker and onnxruntime are written to $NEE_WRITTEN_MODELS_DIR when set.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "format/onnx_reader.h"
#include "format/onnx_writer.h"
#include "format_test_util.h"
#include "model_compare.h"

namespace nee {
namespace {

using namespace testing_format;

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(FormatWriter, FixturesRoundTrip) {
  for (const char* name : {"small.onnx", "tensors.onnx", "attributes.onnx", "types.onnx", "functions.onnx",
                           "external/model.onnx"}) {
    SCOPED_TRACE(name);
    auto first = ReadModelFile(DataPath(name));
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    auto bytes = SerializeModel(first.value());
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    auto second = ReadModelBytes(Bytes(bytes.value()), ReadOptions());
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(CompareModels(first.value(), second.value()), "");
    // Serializing is deterministic and stable.
    auto again = SerializeModel(second.value());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again.value(), bytes.value());
  }
}

TEST(FormatWriter, SameBytesAsProtobufForFullyKeptModels) {
  // These fixtures use only fields the IR keeps and raw_data tensors, so
  // nee must reproduce protobuf's serialization exactly.
  for (const char* name : {"small.onnx", "functions.onnx"}) {
    SCOPED_TRACE(name);
    std::string original = ReadFileBytes(DataPath(name));
    auto model = ReadModelBytes(Bytes(original), ReadOptions());
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto bytes = SerializeModel(model.value());
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(bytes.value().size(), original.size());
    EXPECT_TRUE(bytes.value() == original);
  }
}

TEST(FormatWriter, TensorProtoRoundTripForEveryType) {
  auto model = ReadModelFile(DataPath("tensors.onnx"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  int count = 0;
  for (const Initializer& init : model->graph.initializers) {
    SCOPED_TRACE(init.name);
    auto bytes = SerializeTensorProto(init.tensor, init.name);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    auto back = ReadTensorProto(Bytes(bytes.value()));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(CompareTensors(init.tensor, back.value(), init.name), "");
    ++count;
  }
  EXPECT_GT(count, 50);
  auto undefined = SerializeTensorProto(Tensor(), "x");
  EXPECT_FALSE(undefined.ok());
}

TEST(FormatWriter, ExternalDataIsAlignedAndMapsBack) {
  auto model = ReadModelFile(DataPath("small.onnx"));
  ASSERT_TRUE(model.ok());
  // Add a few initializers of odd sizes so alignment padding is exercised.
  for (int i = 0; i < 3; ++i) {
    auto t = Tensor::Allocate(DataType::kFloat, {100 + i});
    ASSERT_TRUE(t.ok());
    for (int k = 0; k < 100 + i; ++k) t->data<float>()[k] = static_cast<float>(k * (i + 1));
    model->graph.initializers.push_back({"extra" + std::to_string(i), t.value(), ""});
  }
  TempDir tmp;
  WriteOptions options;
  options.external_data_threshold = 64;
  options.external_data_file = "weights.data";
  Status s = WriteModelFile(model.value(), tmp / "model.onnx", options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(std::filesystem::exists(tmp / "weights.data"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "model.onnx.tmp-nee"));
  auto back = ReadModelFile(tmp / "model.onnx");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(CompareModels(model.value(), back.value()), "");
  std::shared_ptr<MappedFile> weights;
  for (const auto& m : back->mappings)
    if (Contains(m->path(), "weights.data")) weights = m;
  ASSERT_NE(weights, nullptr);
  int external = 0;
  for (const Initializer& init : back->graph.initializers) {
    const uint8_t* p = static_cast<const uint8_t*>(init.tensor.raw_data());
    bool in_weights = p >= weights->data() && p < weights->data() + weights->size();
    EXPECT_EQ(in_weights, init.tensor.byte_size() > 64) << init.name;
    if (in_weights) {
      EXPECT_EQ((p - weights->data()) % 4096, 0) << init.name;
      ++external;
    }
  }
  EXPECT_EQ(external, 3);
}

bool InsideMapping(const Model& m, const void* p) {
  for (const auto& f : m.mappings)
    if (p >= f->data() && p < f->data() + f->size()) return true;
  return false;
}

// Every tensor the writer aligns (initializers and tensor attributes) must
// come back as an in-place view at a 64-byte boundary.
void ExpectAlignedViews(const Model& back) {
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (const Initializer& init : back.graph.initializers) tensors.push_back({init.name, &init.tensor});
  for (const Node& n : back.graph.nodes)
    for (const Attribute& a : n.attributes) {
      if (a.type == AttrType::kTensor) tensors.push_back({n.name + "." + a.name, &a.t});
      for (const Tensor& t : a.tensors) tensors.push_back({n.name + "." + a.name, &t});
    }
  int views = 0;
  for (const auto& [name, t] : tensors) {
    if (t->dtype() == DataType::kString || t->byte_size() == 0) continue;
    if (ElementBits(t->dtype()) < 16 && t->byte_size() < 64) continue;
    EXPECT_TRUE(InsideMapping(back, t->raw_data())) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw_data()) % 64, 0u) << name;
    ++views;
  }
  EXPECT_GT(views, 0);
}

TEST(FormatWriter, AlignedFilesLoadWithoutCopies) {
  TempDir tmp;
  for (const char* name : {"small.onnx", "tensors.onnx", "attributes.onnx"}) {
    SCOPED_TRACE(name);
    auto model = ReadModelFile(DataPath(name));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    ASSERT_TRUE(WriteModelFile(model.value(), tmp / "aligned.onnx").ok());
    auto back = ReadModelFile(tmp / "aligned.onnx");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(CompareModels(model.value(), back.value()), "");
    ExpectAlignedViews(back.value());
  }
}

TEST(FormatWriter, AlignmentConvergesWithManyTensors) {
  // Hundreds of odd-sized tensors: each pad changes message lengths (and
  // their varint sizes) that move every later tensor.
  Model model;
  model.ir_version = 8;
  model.opset_imports.push_back({"", 17});
  for (int i = 0; i < 300; ++i) {
    auto t = Tensor::Allocate(i % 3 == 0 ? DataType::kDouble : DataType::kFloat16, {1 + (i * 37) % 250});
    ASSERT_TRUE(t.ok());
    std::memset(t->raw_data(), i & 0xff, t->byte_size());
    model.graph.initializers.push_back({"t" + std::to_string(i) + std::string(i % 7, 'x'), t.value(), ""});
  }
  TempDir tmp;
  ASSERT_TRUE(WriteModelFile(model, tmp / "many.onnx").ok());
  auto back = ReadModelFile(tmp / "many.onnx");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(CompareModels(model, back.value()), "");
  ExpectAlignedViews(back.value());
}

TEST(FormatWriter, UnalignedFileMatchesProtobufBytes) {
  TempDir tmp;
  auto model = ReadModelFile(DataPath("small.onnx"));
  ASSERT_TRUE(model.ok());
  WriteOptions options;
  options.align_tensor_data = false;
  ASSERT_TRUE(WriteModelFile(model.value(), tmp / "plain.onnx", options).ok());
  EXPECT_TRUE(ReadFileBytes(tmp / "plain.onnx") == ReadFileBytes(DataPath("small.onnx")));
}

TEST(FormatWriter, ValueProtosMatchWhatOnnxWrote) {
  // Re-serializing the fixtures numpy_helper wrote gives the same bytes
  // (same field order and encoding) when given the same name.
  struct Case {
    const char* file;
    const char* name;
    TypeInfo type;
  };
  std::vector<Case> cases = {
      {"values/tensor.pb", "t", TypeInfo::Tensor(DataType::kFloat)},
      {"values/string_tensor.pb", "s", TypeInfo::Tensor(DataType::kString)},
      {"values/sequence.pb", "seq", TypeInfo::Sequence(TypeInfo::Tensor(DataType::kInt64))},
      {"values/empty_sequence.pb", "empty_seq", TypeInfo::Sequence(TypeInfo::Tensor(DataType::kFloat))},
      {"values/map_int.pb", "map", TypeInfo::Map(DataType::kInt64, TypeInfo::Tensor(DataType::kFloat))},
      {"values/map_string.pb", "smap", TypeInfo::Map(DataType::kString, TypeInfo::Tensor(DataType::kInt64))},
      {"values/optional_empty.pb", "none", TypeInfo::Optional(TypeInfo::Tensor(DataType::kInt32))},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    auto value = ReadValueProtoFileAs(DataPath(c.file), c.type);
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    auto bytes = SerializeValueProto(value.value(), c.name);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_TRUE(bytes.value() == ReadFileBytes(DataPath(c.file)));
    auto again = ReadValueProtoBytes(Bytes(bytes.value()), &c.type);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->kind(), value->kind());
  }
}

TEST(FormatWriter, RefusesUnsafeExternalLocations) {
  auto model = ReadModelFile(DataPath("small.onnx"));
  ASSERT_TRUE(model.ok());
  TempDir tmp;
  WriteOptions options;
  options.external_data_threshold = 0;
  for (const char* location : {"../up.data", "/tmp/abs.data"}) {
    options.external_data_file = location;
    Status s = WriteModelFile(model.value(), tmp / "model.onnx", options);
    EXPECT_FALSE(s.ok()) << location;
  }
}

TEST(FormatWriter, OverwritingTheMappedSourceIsSafe) {
  TempDir tmp;
  std::filesystem::copy_file(DataPath("small.onnx"), tmp / "m.onnx");
  auto model = ReadModelFile(tmp / "m.onnx");
  ASSERT_TRUE(model.ok());
  const Initializer* w = model->graph.FindInitializer("w");
  ASSERT_NE(w, nullptr);
  float before = w->tensor.data<float>()[5];
  model->producer_name = "rewritten";
  ASSERT_TRUE(WriteModelFile(model.value(), tmp / "m.onnx").ok());
  EXPECT_EQ(w->tensor.data<float>()[5], before);  // the old mapping is still valid
  auto back = ReadModelFile(tmp / "m.onnx");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->producer_name, "rewritten");
  EXPECT_EQ(CompareModels(model.value(), back.value()), "");
}

TEST(FormatWriter, ErrorsForIncompleteIr) {
  Model model;
  model.ir_version = 8;
  model.opset_imports.push_back({"", 17});
  Node node;
  node.op_type = "Relu";
  node.name = "r";
  Attribute bad;
  bad.name = "alpha";  // no type
  node.attributes.push_back(bad);
  model.graph.nodes.push_back(node);
  auto bytes = SerializeModel(model);
  ASSERT_FALSE(bytes.ok());
  EXPECT_TRUE(Contains(bytes.status().message(), "node 'r' (Relu) attribute 'alpha'")) << bytes.status().message();
}

// A model built directly in the IR (not read from a file): MatMul + Add with
// a symbolic batch dimension, checked by check_written_models.py.
Model BuildLinearModel() {
  Model model;
  model.ir_version = 8;
  model.producer_name = "nee-writer-test";
  model.opset_imports.push_back({"", 17});
  Graph& g = model.graph;
  g.name = "linear";
  TypeInfo x_type = TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Symbol("batch"), Dim::Known(3)});
  g.inputs.push_back({"x", x_type, "", {}});
  g.outputs.push_back({"y", TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Symbol("batch"), Dim::Known(2)}), "", {}});
  Tensor w = Tensor::FromVector<float>({1, -1, 0.5f, 2, 0, 3}, {3, 2});
  Tensor b = Tensor::FromVector<float>({0.25f, -0.75f}, {2});
  g.initializers.push_back({"w", w, ""});
  g.initializers.push_back({"b", b, ""});
  Node matmul;
  matmul.name = "matmul";
  matmul.op_type = "MatMul";
  matmul.inputs = {"x", "w"};
  matmul.outputs = {"xw"};
  Node add;
  add.name = "add";
  add.op_type = "Add";
  add.inputs = {"xw", "b"};
  add.outputs = {"y"};
  g.nodes = {matmul, add};
  return model;
}

TEST(FormatWriter, WritesModelsForTheExternalChecker) {
  // With NEE_WRITTEN_MODELS_DIR set (by check_written_models.py), the models
  // stay there to be checked by onnx.checker and onnxruntime.
  const char* env = std::getenv("NEE_WRITTEN_MODELS_DIR");
  TempDir tmp;
  std::string dir = env && *env ? std::string(env) : tmp.path();
  std::filesystem::create_directories(dir);
  struct Source {
    const char* fixture;  // nullptr: built in the IR
    const char* out;
    int64_t threshold;
  };
  for (const Source& s : {Source{"small.onnx", "small.onnx", -1}, Source{"functions.onnx", "functions.onnx", -1},
                          Source{"external/model.onnx", "external.onnx", 16},
                          Source{"external/model.onnx", "external_inlined.onnx", -1},
                          Source{nullptr, "linear.onnx", -1}, Source{nullptr, "linear_external.onnx", 0}}) {
    SCOPED_TRACE(s.out);
    Model model;
    if (s.fixture) {
      auto read = ReadModelFile(DataPath(s.fixture));
      ASSERT_TRUE(read.ok()) << read.status().ToString();
      model = std::move(read).value();
    } else {
      model = BuildLinearModel();
    }
    WriteOptions options;
    options.external_data_threshold = s.threshold;
    Status st = WriteModelFile(model, dir + "/" + s.out, options);
    ASSERT_TRUE(st.ok()) << st.ToString();
    auto back = ReadModelFile(dir + "/" + s.out);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(CompareModels(model, back.value()), "");
  }
}

}  // namespace
}  // namespace nee
