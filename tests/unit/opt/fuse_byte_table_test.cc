// fuse-byte-table (src/opt/fuse_byte_table.cc): an element-wise chain from one 8-bit tensor to another, its other
// operands one-value constants, becomes one ai.nee TableLookup. The quantized SiLU in both forms ONNX Runtime's
// quantize_static writes (QDQ: DequantizeLinear, Sigmoid, QuantizeLinear, Mul; QOperator: QLinearSigmoid then
// QLinearMul) and a HardSwish as DequantizeLinear -> HardSigmoid -> QuantizeLinear -> QLinearMul. The table is
// the reference kernels' result for each byte, so the optimized model must equal the unoptimized one run by the
// reference kernels bitwise, for inputs holding every byte value. Near misses stay unfused: a value inside read
// elsewhere (only the part that closes is fused), a per-channel scale, two 8-bit sources, a constant of many
// values.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "opt_test_util.h"

namespace nee {
namespace {
using namespace opt_test;

constexpr int64_t kC = 3, kH = 10, kW = 9;  // 270 elements: every byte value and then some

Tensor EveryByte(DataType type) {
  std::vector<int64_t> dims = {1, kC, kH, kW};
  Tensor t = Tensor::Allocate(type, dims).value();
  auto* bytes = static_cast<uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.num_elements(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);  // 7 is odd: all 256
  return t;
}

Tensor ZeroPoint(DataType type, int value) {
  return type == DataType::kUint8 ? Tensor::FromVector(std::vector<uint8_t>{static_cast<uint8_t>(value)}, {})
                                  : Tensor::FromVector(std::vector<int8_t>{static_cast<int8_t>(value - 128)}, {});
}

ModelBuilder Start(DataType type, int64_t opset = 13) {
  ModelBuilder b(opset);
  b.Input("x", Shape{Dim::Known(1), Dim::Known(kC), Dim::Known(kH), Dim::Known(kW)}, type)
      .Init("xs", Scalar(0.071f))
      .Init("xz", ZeroPoint(type, 131))
      .Init("ss", Scalar(1.0f / 255))
      .Init("sz", ZeroPoint(type, 0))
      .Init("ys", Scalar(0.043f))
      .Init("yz", ZeroPoint(type, 20));
  return b;
}

void Microsoft(ModelBuilder& b) {
  b.model.graph.nodes.back().domain = "com.microsoft";
  if (b.model.OpsetVersion("com.microsoft") < 0) b.model.opset_imports.push_back({"com.microsoft", 1});
}

// The optimized model is one TableLookup (plus `others`) and equals the reference run of the unfused model.
void ExpectTable(const Model& model, DataType type, const Ops& want) {
  EXPECT_EQ(OpsAfter(model), want);
  const std::vector<NamedValue> in = {{"x", Value(EveryByte(type))}};
  const Tensor reference = RunAt(model, in, 0, 1, /*reference_only=*/true);
  for (int threads : {1, 2}) {
    const Tensor fused = RunAt(model, in, 99, threads);
    ASSERT_TRUE(reference.defined() && fused.defined());
    ASSERT_EQ(fused.dtype(), reference.dtype());
    ASSERT_EQ(fused.dims(), reference.dims());
    EXPECT_EQ(std::memcmp(fused.raw_data(), reference.raw_data(), reference.byte_size()), 0);
  }
}

// The QDQ SiLU of x: y = Q(DQ(x) * DQ(Q(Sigmoid(DQ(x))))).
void AddQdqSilu(ModelBuilder& b) {
  b.Op("DequantizeLinear", {"x", "xs", "xz"}, {"d"})
      .Op("Sigmoid", {"d"}, {"s"})
      .Op("QuantizeLinear", {"s", "ss", "sz"}, {"sq"})
      .Op("DequantizeLinear", {"sq", "ss", "sz"}, {"sd"})
      .Op("Mul", {"d", "sd"}, {"m"})
      .Op("QuantizeLinear", {"m", "ys", "yz"}, {"y"})
      .Output("y");
}

TEST(FuseByteTable, QdqSilu) {
  for (DataType type : {DataType::kUint8, DataType::kInt8}) {
    ModelBuilder b = Start(type);
    AddQdqSilu(b);
    ExpectTable(b.model, type, {"TableLookup"});
  }
}

TEST(FuseByteTable, SiluAfterAQuantizeLinearStopsAtItsOutput) {
  // x is a QuantizeLinear's output (a QDQ model's conv output): the cone ends at x, not past it into float.
  ModelBuilder b(13);
  b.Input("f", Shape{Dim::Known(1), Dim::Known(kC), Dim::Known(kH), Dim::Known(kW)})
      .Init("xs", Scalar(0.071f))
      .Init("xz", ZeroPoint(DataType::kUint8, 131))
      .Init("ss", Scalar(1.0f / 255))
      .Init("sz", ZeroPoint(DataType::kUint8, 0))
      .Init("ys", Scalar(0.043f))
      .Init("yz", ZeroPoint(DataType::kUint8, 20))
      .Op("QuantizeLinear", {"f", "xs", "xz"}, {"x"});
  AddQdqSilu(b);
  EXPECT_EQ(OpsAfter(b.model), (Ops{"QuantizeLinear", "TableLookup"}));
  // Floats that quantize to every byte: (v - 131) * 0.071 for v = 0..255 and on.
  Tensor f = Tensor::Allocate(DataType::kFloat, {1, kC, kH, kW}).value();
  for (int64_t i = 0; i < f.num_elements(); ++i)
    f.data<float>()[i] = static_cast<float>((i * 7 + 3) % 256 - 131) * 0.071f;
  const std::vector<NamedValue> in = {{"f", Value(f)}};
  const Tensor reference = RunAt(b.model, in, 0, 1, /*reference_only=*/true);
  const Tensor fused = RunAt(b.model, in, 99, 1);
  ASSERT_TRUE(reference.defined() && fused.defined());
  EXPECT_EQ(std::memcmp(fused.raw_data(), reference.raw_data(), reference.byte_size()), 0);
}

TEST(FuseByteTable, QOperatorSiluAndHardSwish) {
  for (DataType type : {DataType::kUint8, DataType::kInt8}) {
    ModelBuilder b = Start(type);
    b.Op("QLinearSigmoid", {"x", "xs", "xz", "ss", "sz"}, {"sq"});
    Microsoft(b);
    b.Op("QLinearMul", {"x", "xs", "xz", "sq", "ss", "sz", "ys", "yz"}, {"y"});
    Microsoft(b);
    b.Output("y");
    ExpectTable(b.model, type, {"TableLookup"});

    ModelBuilder h = Start(type);
    h.Op("DequantizeLinear", {"x", "xs", "xz"}, {"d"})
        .Op("HardSigmoid", {"d"}, {"s"}, {FloatAttr("alpha", 1.0f / 6)})
        .Op("QuantizeLinear", {"s", "ss", "sz"}, {"sq"})
        .Op("QLinearMul", {"x", "xs", "xz", "sq", "ss", "sz", "ys", "yz"}, {"y"});
    Microsoft(h);
    h.Output("y");
    ExpectTable(h.model, type, {"TableLookup"});
  }
}

TEST(FuseByteTable, ValueReadElsewhereKeepsItsPartUnfused) {
  // The sigmoid's quantized output is a graph output too: only DequantizeLinear -> Sigmoid -> QuantizeLinear
  // closes (one table); the Sub reads its DequantizeLinear and x's.
  ModelBuilder b = Start(DataType::kUint8);
  b.Op("DequantizeLinear", {"x", "xs", "xz"}, {"d"})
      .Op("Sigmoid", {"d"}, {"s"})
      .Op("QuantizeLinear", {"s", "ss", "sz"}, {"sq"})
      .Op("DequantizeLinear", {"sq", "ss", "sz"}, {"sd"})
      .Op("DequantizeLinear", {"x", "xs", "xz"}, {"d2"})
      .Op("Sub", {"d2", "sd"}, {"m"})
      .Op("QuantizeLinear", {"m", "ys", "yz"}, {"y"})
      .Output("y")
      .Output("sq");
  ExpectTable(b.model, DataType::kUint8,
              {"TableLookup", "DequantizeLinear", "DequantizeLinear", "Sub", "QuantizeLinear"});
}

TEST(FuseByteTable, NearMissesStayUnfused) {
  {  // a per-channel scale
    ModelBuilder b = Start(DataType::kUint8);
    b.Init("xs3", Floats({0.1f, 0.2f, 0.3f}, {kC}))
        .Op("DequantizeLinear", {"x", "xs3", "xz"}, {"d"}, {IntAttr("axis", 1)})
        .Op("Sigmoid", {"d"}, {"s"})
        .Op("QuantizeLinear", {"s", "ss", "sz"}, {"y"})
        .Output("y");
    EXPECT_EQ(OpsAfter(b.model), (Ops{"DequantizeLinear", "Sigmoid", "QuantizeLinear"}));
  }
  {  // two 8-bit sources
    ModelBuilder b = Start(DataType::kUint8);
    b.Input("x2", Shape{Dim::Known(1), Dim::Known(kC), Dim::Known(kH), Dim::Known(kW)}, DataType::kUint8)
        .Op("QLinearAdd", {"x", "xs", "xz", "x2", "xs", "xz", "ys", "yz"}, {"y"});
    Microsoft(b);
    b.Output("y");
    EXPECT_EQ(OpsAfter(b.model), (Ops{"QLinearAdd"}));
  }
  {  // a constant of many values (a per-channel multiplier)
    ModelBuilder b = Start(DataType::kUint8);
    b.Init("k", Random({1, kC, 1, 1}, 4))
        .Op("DequantizeLinear", {"x", "xs", "xz"}, {"d"})
        .Op("Mul", {"d", "k"}, {"m"})
        .Op("QuantizeLinear", {"m", "ys", "yz"}, {"y"})
        .Output("y");
    EXPECT_EQ(OpsAfter(b.model), (Ops{"DequantizeLinear", "Mul", "QuantizeLinear"}));
  }
  {  // a float output: nothing 8-bit to write a table of
    ModelBuilder b = Start(DataType::kUint8);
    b.Op("DequantizeLinear", {"x", "xs", "xz"}, {"d"}).Op("Sigmoid", {"d"}, {"y"}).Output("y");
    EXPECT_EQ(OpsAfter(b.model), (Ops{"DequantizeLinear", "Sigmoid"}));
  }
}

}  // namespace
}  // namespace nee
