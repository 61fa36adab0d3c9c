// Cast and CastLike. The bulk of the expected values are ONNX's own node
// tests (extracted by tests/unit/ir/make_onnx_cast_cases.py from the onnx
// package, whose data comes from numpy / ml_dtypes); the hand-written cases
// say how their expected values were computed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../paths_util.h"
#include "ir/convert.h"
#include "ir/float_formats.h"
#include "op_test_util.h"

namespace nee {
namespace {

using testing::IntAttr;
using testing::MakeNode;
using testing::RunOp;
using testing::StringAttr;

// ---- ONNX node tests ---------------------------------------------------------

struct TensorSpec {
  DataType type;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};

struct OnnxCase {
  std::string name;
  std::string op;
  int64_t opset = 0;
  std::vector<Attribute> attributes;
  std::vector<TensorSpec> inputs, outputs;
};

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  if (hex == "-") return out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

TensorSpec ParseTensor(std::istringstream& line) {
  TensorSpec t;
  int type;
  std::string dims, hex;
  line >> type >> dims >> hex;
  t.type = static_cast<DataType>(type);
  if (dims != "-") {
    std::stringstream ds(dims);
    std::string d;
    while (std::getline(ds, d, ',')) t.dims.push_back(std::stoll(d));
  }
  t.bytes = FromHex(hex);
  return t;
}

std::vector<OnnxCase> LoadOnnxCases() {
  std::ifstream in(std::string(NEE_TEST_DATA_DIR) + "/unit/ir/data/onnx_cast_cases.txt");
  EXPECT_TRUE(in.good());
  std::vector<OnnxCase> cases;
  std::string text;
  OnnxCase current;
  while (std::getline(in, text)) {
    std::istringstream line(text);
    std::string kind;
    line >> kind;
    if (kind == "case") {
      current = OnnxCase();
      line >> current.name >> current.op >> current.opset;
    } else if (kind == "attr") {
      std::string name, type, value;
      line >> name >> type >> value;
      current.attributes.push_back(type == "int" ? IntAttr(name, std::stoll(value)) : StringAttr(name, value));
    } else if (kind == "input") {
      current.inputs.push_back(ParseTensor(line));
    } else if (kind == "output") {
      current.outputs.push_back(ParseTensor(line));
    } else if (kind == "end") {
      cases.push_back(current);
    }
  }
  return cases;
}

// Element-wise agreement allowing only a different NaN encoding.
bool SameExceptNanEncoding(const Tensor& actual, const TensorSpec& expected) {
  Tensor want = Tensor::Allocate(expected.type, expected.dims).value();
  std::memcpy(want.raw_data(), expected.bytes.data(), expected.bytes.size());
  Tensor a = Tensor::Allocate(DataType::kDouble, actual.dims()).value();
  Tensor b = Tensor::Allocate(DataType::kDouble, actual.dims()).value();
  if (!ConvertTensor(actual, a).ok() || !ConvertTensor(want, b).ok()) return false;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    double x = a.data<double>()[i], y = b.data<double>()[i];
    if (!(x == y || (std::isnan(x) && std::isnan(y)))) return false;
  }
  return true;
}

TEST(CastTest, OnnxNodeTests) {
  std::vector<OnnxCase> cases = LoadOnnxCases();
  ASSERT_GE(cases.size(), 100u);
  int passed = 0;
  for (const OnnxCase& c : cases) {
    SCOPED_TRACE(c.name);
    Node node = MakeNode(c.op, c.inputs.size(), c.outputs.size(), c.attributes);
    std::vector<Value> inputs;
    for (const TensorSpec& spec : c.inputs) {
      Tensor t = Tensor::Allocate(spec.type, spec.dims).value();
      ASSERT_EQ(t.byte_size(), spec.bytes.size());
      // (An empty tensor has no bytes: memcpy from a null pointer is undefined even for 0 bytes; UBSan.)
      if (!spec.bytes.empty()) std::memcpy(t.raw_data(), spec.bytes.data(), spec.bytes.size());
      inputs.push_back(t);
    }
    Result<testing::OpRun> run = RunOp(node, c.opset, inputs);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    const Tensor& out = run->outputs[0].tensor();
    const TensorSpec& want = c.outputs[0];
    ASSERT_EQ(out.dtype(), want.type);
    ASSERT_EQ(out.dims(), want.dims);
    ASSERT_EQ(out.byte_size(), want.bytes.size());
    const bool bitwise = std::memcmp(out.raw_data(), want.bytes.data(), want.bytes.size()) == 0;
    EXPECT_TRUE(bitwise || SameExceptNanEncoding(out, want)) << "output differs";
    if (bitwise) ++passed;
  }
  // Every case matches bit for bit (the NaN-tolerant check is a fallback
  // that makes a future encoding change fail with a clear message).
  EXPECT_EQ(passed, static_cast<int>(cases.size()));
}

// ---- Attributes across versions ----------------------------------------------

Tensor Floats(std::vector<float> v) { return Tensor::FromVector<float>(v, {static_cast<int64_t>(v.size())}); }

TEST(CastTest, Cast1TakesATypeName) {
  Node node = MakeNode("Cast", 1, 1, {StringAttr("to", "INT32")});
  Result<testing::OpRun> run = RunOp(node, 1, {Floats({1.9f, -2.9f})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  testing::ExpectTensorNear<int32_t>(run->outputs[0].tensor(), {2}, {1, -2});  // truncation, as numpy
}

TEST(CastTest, SaturateIsHonouredFromOpset19) {
  // ml_dtypes: float32 1e6 -> float8e4m3fn is NaN (0x7F) without saturation,
  // onnx.numpy_helper.saturate_cast gives 448 (0x7E).
  Node saturating = MakeNode("Cast", 1, 1, {IntAttr("to", 17)});
  Node plain = MakeNode("Cast", 1, 1, {IntAttr("to", 17), IntAttr("saturate", 0)});
  Result<testing::OpRun> a = RunOp(saturating, 19, {Floats({1e6f})});
  Result<testing::OpRun> b = RunOp(plain, 19, {Floats({1e6f})});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->outputs[0].tensor().data<uint8_t>()[0], 0x7E);
  EXPECT_EQ(b->outputs[0].tensor().data<uint8_t>()[0], 0x7F);
}

TEST(CastTest, RoundModeForFloat8E8M0) {
  // onnx.numpy_helper.to_float8e8m0([0.124, 1.1, 1.6, 4.0], True, mode):
  // up -> [124, 128, 128, 129], down -> [123, 127, 127, 129], nearest -> [124, 127, 128, 129].
  const std::vector<std::pair<std::string, std::vector<uint8_t>>> modes = {
      {"up", {124, 128, 128, 129}}, {"down", {123, 127, 127, 129}}, {"nearest", {124, 127, 128, 129}}};
  for (const auto& [mode, expected] : modes) {
    Node node = MakeNode("Cast", 1, 1, {IntAttr("to", 24), StringAttr("round_mode", mode)});
    Result<testing::OpRun> run = RunOp(node, 24, {Floats({0.124f, 1.1f, 1.6f, 4.0f})});
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    const Tensor& out = run->outputs[0].tensor();
    EXPECT_EQ(std::vector<uint8_t>(out.data<uint8_t>(), out.data<uint8_t>() + 4), expected) << mode;
  }
  Node bad = MakeNode("Cast", 1, 1, {IntAttr("to", 24), StringAttr("round_mode", "sideways")});
  Result<testing::OpRun> run = RunOp(bad, 24, {Floats({1.0f})});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("round_mode"), std::string::npos);
}

TEST(CastTest, CastLikeTakesTheSecondInputsType) {
  Node node = MakeNode("CastLike", 2, 1, {});
  Result<testing::OpRun> run =
      RunOp(node, 15, {Floats({1.5f, 300.0f}), Tensor::FromVector<uint8_t>({0}, {1})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // numpy: np.array([1.5, 300], np.float32).astype(np.uint8) == [1, 44]
  testing::ExpectTensorNear<uint8_t>(run->outputs[0].tensor(), {2}, {1, 44});
}

TEST(CastTest, StringsBothWays) {
  Node to_string = MakeNode("Cast", 1, 1, {IntAttr("to", 8)});
  Result<testing::OpRun> run = RunOp(to_string, 13, {Floats({0.5f, -INFINITY, 1e-5f})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // numpy: np.array([0.5, -inf, 1e-5], np.float32).astype(str)
  testing::ExpectTensorNear<std::string>(run->outputs[0].tensor(), {3}, {"0.5", "-inf", "1e-05"});

  Node to_float = MakeNode("Cast", 1, 1, {IntAttr("to", 1)});
  run = RunOp(to_float, 13, {Tensor::FromVector<std::string>({"3.25", "-INF", "1E8"}, {3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const Tensor& parsed = run->outputs[0].tensor();
  ASSERT_EQ(parsed.dtype(), DataType::kFloat);
  EXPECT_EQ(std::vector<float>(parsed.data<float>(), parsed.data<float>() + 3),
            (std::vector<float>{3.25f, -INFINITY, 1e8f}));

  run = RunOp(to_float, 13, {Tensor::FromVector<std::string>({"1", "pi"}, {2})});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(run.status().message().find("'test'"), std::string::npos) << run.status().message();
  EXPECT_NE(run.status().message().find("\"pi\""), std::string::npos) << run.status().message();
}

TEST(CastTest, EmptyAndScalarTensors) {
  Node node = MakeNode("Cast", 1, 1, {IntAttr("to", 10)});
  Result<testing::OpRun> run = RunOp(node, 13, {Tensor::Allocate(DataType::kFloat, {0, 3}).value()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->outputs[0].tensor().dims(), (std::vector<int64_t>{0, 3}));
  run = RunOp(node, 13, {Tensor::Scalar<float>(1.0f)});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_TRUE(run->outputs[0].tensor().dims().empty());
  EXPECT_EQ(run->outputs[0].tensor().data<uint16_t>()[0], 0x3C00);  // numpy: float16(1.0) bits
  Node to_int4 = MakeNode("Cast", 1, 1, {IntAttr("to", 22)});
  EXPECT_TRUE(RunOp(to_int4, 21, {Tensor::Allocate(DataType::kFloat, {0}).value()}).ok());
}

TEST(CastTest, InvalidTargetTypesAreErrors) {
  for (int64_t to : {0, 99, -1}) {
    Node node = MakeNode("Cast", 1, 1, {IntAttr("to", to)});
    Result<testing::OpRun> run = RunOp(node, 13, {Floats({1.0f})});
    ASSERT_FALSE(run.ok()) << to;
    EXPECT_NE(run.status().message().find("'to'"), std::string::npos);
  }
  Node complex = MakeNode("Cast", 1, 1, {IntAttr("to", 14)});
  EXPECT_EQ(RunOp(complex, 13, {Floats({1.0f})}).status().code(), StatusCode::kNotImplemented);
  Node missing = MakeNode("Cast", 1, 1, {});
  EXPECT_FALSE(RunOp(missing, 13, {Floats({1.0f})}).ok());
}

TEST(CastTest, ParallelPackedOutputIsDeterministic) {
  // 100003 floats to int4 on 1 and 4 threads give the same bytes, and each
  // element is the low nibble of its truncated value (numpy-style wrap).
  std::vector<float> v(100003);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i % 37) - 18) + 0.5f;
  Node node = MakeNode("Cast", 1, 1, {IntAttr("to", 22)});
  Result<testing::OpRun> one = RunOp(node, 21, {Floats(v)}, 1);
  Result<testing::OpRun> four = RunOp(node, 21, {Floats(v)}, 4);
  ASSERT_TRUE(one.ok() && four.ok());
  const Tensor& a = one->outputs[0].tensor();
  const Tensor& b = four->outputs[0].tensor();
  ASSERT_EQ(a.byte_size(), b.byte_size());
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()), 0);
  for (size_t i = 0; i < v.size(); i += 997) {
    const int truncated = static_cast<int>(v[i]);
    const int wrapped = ((truncated & 0xF) ^ 0x8) - 0x8;
    EXPECT_EQ(Int4FromNibble(GetNibble(a.data<uint8_t>(), static_cast<int64_t>(i))), wrapped) << i;
  }
}

TEST(CastTest, ShapeRuleKeepsSymbolicDimsAndFoldsSmallValues) {
  Node node = MakeNode("Cast", 1, 1, {IntAttr("to", 1)});
  const OpSchema* schema = OpRegistry::Global().Resolve("", "Cast", 21).value();
  TypeInfo in = TypeInfo::Tensor(DataType::kInt64, Shape{Dim::Symbol("batch"), Dim::Known(3)});
  Tensor value = Tensor::FromVector<int64_t>({7, -2, 5}, {3});
  TypeInfo in_known = TypeInfo::Tensor(DataType::kInt64, Shape{Dim::Known(3)});

  InferenceContext ctx{node, 21, {&in}, {nullptr}, {}, {}, nullptr};
  ctx.output_types.resize(1);
  ASSERT_TRUE(schema->infer(ctx).ok());
  EXPECT_EQ(ctx.output_types[0].ToString(), "tensor(float)");
  ASSERT_TRUE(ctx.output_types[0].shape.has_value());
  EXPECT_EQ(ShapeToString(*ctx.output_types[0].shape), "[batch,3]");

  InferenceContext folded{node, 21, {&in_known}, {&value}, {}, {}, nullptr};
  folded.output_types.resize(1);
  ASSERT_TRUE(schema->infer(folded).ok());
  ASSERT_EQ(folded.output_values.size(), 1u);
  ASSERT_TRUE(folded.output_values[0].has_value());
  testing::ExpectTensorNear<float>(*folded.output_values[0], {3}, {7.0f, -2.0f, 5.0f}, 0);
}

}  // namespace
}  // namespace nee

namespace nee {
namespace {

TEST(BitCastTest, ReinterpretsBytes) {
  // numpy: np.array([1.0, -2.0], np.float32).view(np.int32) == [1065353216, -1073741824]
  Node node = MakeNode("BitCast", 1, 1, {IntAttr("to", 6)});
  Result<testing::OpRun> run = RunOp(node, 26, {Floats({1.0f, -2.0f})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  testing::ExpectTensorNear<int32_t>(run->outputs[0].tensor(), {2}, {1065353216, -1073741824});

  // Packed types keep their packed bytes: int4 [-1, 2, 3] as uint4 is [15, 2, 3].
  Tensor i4 = Tensor::Allocate(DataType::kInt4, {3}).value();
  SetNibble(i4.data<uint8_t>(), 0, 0xF);
  SetNibble(i4.data<uint8_t>(), 1, 2);
  SetNibble(i4.data<uint8_t>(), 2, 3);
  Node to_uint4 = MakeNode("BitCast", 1, 1, {IntAttr("to", 21)});
  run = RunOp(to_uint4, 26, {i4});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const Tensor& u4 = run->outputs[0].tensor();
  EXPECT_EQ(u4.dtype(), DataType::kUint4);
  EXPECT_EQ(GetNibble(u4.data<uint8_t>(), 0), 15);
  EXPECT_EQ(GetNibble(u4.data<uint8_t>(), 2), 3);

  // Bytes cast to bool are normalised to 0/1.
  Node to_bool = MakeNode("BitCast", 1, 1, {IntAttr("to", 9)});
  run = RunOp(to_bool, 26, {Tensor::FromVector<uint8_t>({0, 1, 2}, {3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  testing::ExpectTensorNear<bool>(run->outputs[0].tensor(), {3}, {false, true, true});
}

TEST(BitCastTest, WidthsMustMatch) {
  Node node = MakeNode("BitCast", 1, 1, {IntAttr("to", 7)});
  Result<testing::OpRun> run = RunOp(node, 26, {Floats({1.0f})});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("bit widths"), std::string::npos) << run.status().message();
  Node to_string = MakeNode("BitCast", 1, 1, {IntAttr("to", 8)});
  EXPECT_FALSE(RunOp(to_string, 26, {Floats({1.0f})}).ok());
}

}  // namespace
}  // namespace nee
