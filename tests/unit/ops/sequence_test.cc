// Sequence and optional ops. Expected values are small enough to check by
// hand; the numpy expression giving each is in a comment.
#include <gtest/gtest.h>

#include "op_test_util.h"

namespace nee {
namespace {

using testing::ExpectTensorNear;
using testing::IntAttr;
using testing::MakeNode;
using testing::RunOp;

Tensor Ints(std::vector<int64_t> v, std::vector<int64_t> dims) { return Tensor::FromVector<int64_t>(v, dims); }
Tensor Floats(std::vector<float> v, std::vector<int64_t> dims) { return Tensor::FromVector<float>(v, dims); }

Value IntSeq(std::vector<Tensor> tensors) {
  std::vector<Value> elements(tensors.begin(), tensors.end());
  return Value::Sequence(std::move(elements), TypeInfo::Tensor(DataType::kInt64));
}

// A sequence of three int64 tensors: [1], [2, 3], [4, 5, 6].
Value ThreeSeq() { return IntSeq({Ints({1}, {1}), Ints({2, 3}, {2}), Ints({4, 5, 6}, {3})}); }

Node WithoutInput(Node node, size_t i) {
  node.inputs[i] = "";
  return node;
}

TEST(Sequence, ConstructCopiesTheTensors) {
  Tensor a = Floats({1, 2}, {2}), b = Floats({3}, {1});
  auto run = RunOp(MakeNode("SequenceConstruct", 2, 1), 11, {a, b});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const Value& seq = run->outputs[0];
  ASSERT_TRUE(seq.is_sequence());
  ASSERT_EQ(seq.elements().size(), 2u);
  ExpectTensorNear<float>(seq.elements()[0].tensor(), {2}, {1, 2});
  ExpectTensorNear<float>(seq.elements()[1].tensor(), {1}, {3});
  EXPECT_NE(seq.elements()[0].tensor().raw_data(), a.raw_data());  // a fresh copy, not the input's bytes
  EXPECT_EQ(seq.element_type().elem_type, DataType::kFloat);
  // The rule: seq(tensor(float)) of rank 1 (dims differ).
  const TypeInfo& t = run->inferred[0];
  ASSERT_EQ(t.kind, TypeInfo::Kind::kSequence);
  EXPECT_EQ(t.inner->elem_type, DataType::kFloat);
  EXPECT_EQ(ShapeToString(*t.inner->shape), "[?]");
}

TEST(Sequence, ConstructRejectsMixedTypes) {
  auto run = RunOp(MakeNode("SequenceConstruct", 2, 1), 11, {Floats({1}, {1}), Ints({1}, {1})});
  EXPECT_FALSE(run.ok());
}

TEST(Sequence, EmptyHasTheRequestedType) {
  auto run = RunOp(MakeNode("SequenceEmpty", 0, 1, {IntAttr("dtype", 7)}), 11, {});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_TRUE(run->outputs[0].elements().empty());
  EXPECT_EQ(run->outputs[0].element_type().elem_type, DataType::kInt64);
  EXPECT_EQ(run->inferred[0].inner->elem_type, DataType::kInt64);
  auto by_default = RunOp(MakeNode("SequenceEmpty", 0, 1), 11, {});
  ASSERT_TRUE(by_default.ok());
  EXPECT_EQ(by_default->outputs[0].element_type().elem_type, DataType::kFloat);
}

TEST(Sequence, AtNormalizesNegativePositionsAndChecksRange) {
  // seq[-1] = [4, 5, 6]; seq[1] = [2, 3]
  auto last = RunOp(MakeNode("SequenceAt", 2, 1), 11, {ThreeSeq(), Ints({-1}, {})});
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  ExpectTensorNear<int64_t>(last->outputs[0].tensor(), {3}, {4, 5, 6});
  auto second = RunOp(MakeNode("SequenceAt", 2, 1), 11, {ThreeSeq(), Tensor::Scalar<int32_t>(1)});
  ASSERT_TRUE(second.ok());
  ExpectTensorNear<int64_t>(second->outputs[0].tensor(), {2}, {2, 3});
  for (int64_t bad : {3, -4}) {
    auto out = RunOp(MakeNode("SequenceAt", 2, 1), 11, {ThreeSeq(), Ints({bad}, {})});
    ASSERT_FALSE(out.ok()) << bad;
    EXPECT_NE(out.status().message().find("out of range"), std::string::npos);
  }
}

std::vector<int64_t> FirstValues(const Value& seq) {
  std::vector<int64_t> firsts;
  for (const Value& e : seq.elements()) firsts.push_back(e.tensor().data<int64_t>()[0]);
  return firsts;
}

TEST(Sequence, InsertAtPositionsAndAtTheBack) {
  // Python list insert: [1],[2,3],[4,5,6] with [9] inserted.
  auto back = RunOp(WithoutInput(MakeNode("SequenceInsert", 3, 1), 2), 11, {ThreeSeq(), Ints({9}, {1}), Value()});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(FirstValues(back->outputs[0]), (std::vector<int64_t>{1, 2, 4, 9}));
  auto front = RunOp(MakeNode("SequenceInsert", 3, 1), 11, {ThreeSeq(), Ints({9}, {1}), Ints({0}, {})});
  ASSERT_TRUE(front.ok());
  EXPECT_EQ(FirstValues(front->outputs[0]), (std::vector<int64_t>{9, 1, 2, 4}));
  auto neg = RunOp(MakeNode("SequenceInsert", 3, 1), 11, {ThreeSeq(), Ints({9}, {1}), Ints({-1}, {})});
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ(FirstValues(neg->outputs[0]), (std::vector<int64_t>{1, 2, 9, 4}));
  auto at_end = RunOp(MakeNode("SequenceInsert", 3, 1), 11, {ThreeSeq(), Ints({9}, {1}), Ints({3}, {})});
  ASSERT_TRUE(at_end.ok());
  EXPECT_EQ(FirstValues(at_end->outputs[0]), (std::vector<int64_t>{1, 2, 4, 9}));
  EXPECT_FALSE(RunOp(MakeNode("SequenceInsert", 3, 1), 11, {ThreeSeq(), Ints({9}, {1}), Ints({4}, {})}).ok());
  EXPECT_FALSE(RunOp(MakeNode("SequenceInsert", 3, 1), 11, {ThreeSeq(), Ints({9}, {1}), Ints({-4}, {})}).ok());
  // The tensor's type must match the sequence's.
  EXPECT_FALSE(RunOp(WithoutInput(MakeNode("SequenceInsert", 3, 1), 2), 11,
                     {ThreeSeq(), Floats({9}, {1}), Value()}).ok());
}

TEST(Sequence, EraseDefaultsToTheLastAndChecksRange) {
  auto last = RunOp(WithoutInput(MakeNode("SequenceErase", 2, 1), 1), 11, {ThreeSeq(), Value()});
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ(FirstValues(last->outputs[0]), (std::vector<int64_t>{1, 2}));
  auto neg = RunOp(MakeNode("SequenceErase", 2, 1), 11, {ThreeSeq(), Ints({-3}, {})});
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ(FirstValues(neg->outputs[0]), (std::vector<int64_t>{2, 4}));
  EXPECT_FALSE(RunOp(MakeNode("SequenceErase", 2, 1), 11, {ThreeSeq(), Ints({3}, {})}).ok());
  EXPECT_FALSE(RunOp(WithoutInput(MakeNode("SequenceErase", 2, 1), 1), 11, {IntSeq({}), Value()}).ok());
}

TEST(Sequence, Length) {
  auto run = RunOp(MakeNode("SequenceLength", 1, 1), 11, {ThreeSeq()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {}, {3});
}

// a = np.arange(6).reshape(3, 2)
Tensor Arange32() { return Ints({0, 1, 2, 3, 4, 5}, {3, 2}); }

TEST(Sequence, SplitToSequenceWithoutSplitGivesUnitChunks) {
  // keepdims=0: [a[0], a[1], a[2]] = [0,1], [2,3], [4,5]
  auto run = RunOp(WithoutInput(MakeNode("SplitToSequence", 2, 1, {IntAttr("keepdims", 0)}), 1), 11,
                   {Arange32(), Value()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const auto& e = run->outputs[0].elements();
  ASSERT_EQ(e.size(), 3u);
  ExpectTensorNear<int64_t>(e[2].tensor(), {2}, {4, 5});
  EXPECT_EQ(ShapeToString(*run->inferred[0].inner->shape), "[2]");
  // keepdims=1 (default): chunks keep the axis, shape [1, 2].
  auto kept = RunOp(WithoutInput(MakeNode("SplitToSequence", 2, 1), 1), 11, {Arange32(), Value()});
  ASSERT_TRUE(kept.ok());
  ExpectTensorNear<int64_t>(kept->outputs[0].elements()[1].tensor(), {1, 2}, {2, 3});
}

TEST(Sequence, SplitToSequenceWithScalarAndListSplits) {
  // np.split(a, [2], 0) = [[0,1],[2,3]], [[4,5]]: chunks of 2, the last shorter.
  auto scalar = RunOp(MakeNode("SplitToSequence", 2, 1), 11, {Arange32(), Ints({2}, {})});
  ASSERT_TRUE(scalar.ok()) << scalar.status().ToString();
  const auto& e = scalar->outputs[0].elements();
  ASSERT_EQ(e.size(), 2u);
  ExpectTensorNear<int64_t>(e[0].tensor(), {2, 2}, {0, 1, 2, 3});
  ExpectTensorNear<int64_t>(e[1].tensor(), {1, 2}, {4, 5});
  // b = np.arange(6).reshape(2, 3); np.split(b, [1], 1) = [[0],[3]], [[1,2],[4,5]]
  auto list = RunOp(MakeNode("SplitToSequence", 2, 1, {IntAttr("axis", -1)}), 24,
                    {Ints({0, 1, 2, 3, 4, 5}, {2, 3}), Ints({1, 2}, {2})});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ExpectTensorNear<int64_t>(list->outputs[0].elements()[0].tensor(), {2, 1}, {0, 3});
  ExpectTensorNear<int64_t>(list->outputs[0].elements()[1].tensor(), {2, 2}, {1, 2, 4, 5});
  // Lengths that do not sum to the axis, a non-positive chunk, a bad axis.
  EXPECT_FALSE(RunOp(MakeNode("SplitToSequence", 2, 1), 11, {Arange32(), Ints({1, 1}, {2})}).ok());
  EXPECT_FALSE(RunOp(MakeNode("SplitToSequence", 2, 1), 11, {Arange32(), Ints({0}, {})}).ok());
  EXPECT_FALSE(RunOp(MakeNode("SplitToSequence", 2, 1, {IntAttr("axis", 2)}), 11, {Arange32(), Ints({1}, {})}).ok());
}

TEST(Sequence, ConcatFromSequenceAlongAnExistingAxis) {
  // np.concatenate([[[1],[2]], [[3,4],[5,6]]], axis=1) = [[1,3,4],[2,5,6]]
  Value seq = IntSeq({Ints({1, 2}, {2, 1}), Ints({3, 4, 5, 6}, {2, 2})});
  auto run = RunOp(MakeNode("ConcatFromSequence", 1, 1, {IntAttr("axis", 1)}), 11, {seq});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {2, 3}, {1, 3, 4, 2, 5, 6});
  // Mismatched non-axis dims and an out-of-range axis are errors.
  EXPECT_FALSE(RunOp(MakeNode("ConcatFromSequence", 1, 1, {IntAttr("axis", 0)}), 11, {seq}).ok());
  EXPECT_FALSE(RunOp(MakeNode("ConcatFromSequence", 1, 1, {IntAttr("axis", 2)}), 11, {seq}).ok());
  EXPECT_FALSE(RunOp(MakeNode("ConcatFromSequence", 1, 1, {IntAttr("axis", 0)}), 11, {IntSeq({})}).ok());
}

TEST(Sequence, ConcatFromSequenceWithNewAxisStacks) {
  // np.stack([[1,2],[3,4]], axis=-1) = [[1,3],[2,4]]
  Value seq = IntSeq({Ints({1, 2}, {2}), Ints({3, 4}, {2})});
  auto run = RunOp(MakeNode("ConcatFromSequence", 1, 1, {IntAttr("axis", -1), IntAttr("new_axis", 1)}), 11, {seq});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {2, 2}, {1, 3, 2, 4});
  // np.stack(..., axis=0) = [[1,2],[3,4]]
  auto front = RunOp(MakeNode("ConcatFromSequence", 1, 1, {IntAttr("axis", 0), IntAttr("new_axis", 1)}), 11, {seq});
  ASSERT_TRUE(front.ok());
  ExpectTensorNear<int64_t>(front->outputs[0].tensor(), {2, 2}, {1, 2, 3, 4});
}

TEST(Sequence, CopiesStringElements) {
  Tensor s = Tensor::FromVector<std::string>({"a", "bc", "def"}, {3});
  auto split = RunOp(MakeNode("SplitToSequence", 2, 1), 11, {s, Ints({1, 2}, {2})});
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  const Tensor& second = split->outputs[0].elements()[1].tensor();
  ASSERT_EQ(second.num_elements(), 2);
  EXPECT_EQ(second.data<std::string>()[0], "bc");
  EXPECT_EQ(second.data<std::string>()[1], "def");
  auto concat = RunOp(MakeNode("ConcatFromSequence", 1, 1, {IntAttr("axis", 0)}), 11, {split->outputs[0]});
  ASSERT_TRUE(concat.ok());
  EXPECT_EQ(concat->outputs[0].tensor().data<std::string>()[2], "def");
}

TEST(Sequence, CopiesPackedInt4Elements) {
  // int4 [1, 2, 3, 4] packs low nibble first into bytes 0x21, 0x43.
  Tensor x = Tensor::Allocate(DataType::kInt4, {4}).value();
  x.data<uint8_t>()[0] = 0x21;
  x.data<uint8_t>()[1] = 0x43;
  auto split = RunOp(MakeNode("SplitToSequence", 2, 1), 11, {x, Ints({1, 3}, {2})});
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  // The second chunk [2, 3, 4] starts at an odd element: it repacks as 0x32, 0x04.
  const Tensor& tail = split->outputs[0].elements()[1].tensor();
  ASSERT_EQ(tail.dims(), (std::vector<int64_t>{3}));
  EXPECT_EQ(tail.data<uint8_t>()[0], 0x32);
  EXPECT_EQ(tail.data<uint8_t>()[1] & 0x0F, 0x04);
}

// ---- Optional ----------------------------------------------------------------------

Attribute TypeAttr(TypeInfo t) {
  Attribute a;
  a.name = "type";
  a.type = AttrType::kTypeProto;
  a.tp = std::move(t);
  return a;
}

TEST(OptionalOps, OptionalWrapsAValueOrMakesAnEmptyOne) {
  auto full = RunOp(MakeNode("Optional", 1, 1), 15, {Floats({1, 2}, {2})});
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ExpectTensorNear<float>(full->outputs[0].tensor(), {2}, {1, 2});
  EXPECT_EQ(full->inferred[0].kind, TypeInfo::Kind::kOptional);
  auto empty = RunOp(MakeNode("Optional", 0, 1, {TypeAttr(TypeInfo::Tensor(DataType::kInt32))}), 15, {});
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->outputs[0].is_none());
  EXPECT_EQ(empty->outputs[0].element_type().elem_type, DataType::kInt32);
  EXPECT_FALSE(RunOp(MakeNode("Optional", 0, 1), 15, {}).ok());  // neither input nor type
}

TEST(OptionalOps, HasElement) {
  Value none = Value::None(TypeInfo::Tensor(DataType::kFloat));
  auto on_none = RunOp(MakeNode("OptionalHasElement", 1, 1), 15, {none});
  ASSERT_TRUE(on_none.ok()) << on_none.status().ToString();
  ExpectTensorNear<bool>(on_none->outputs[0].tensor(), {}, {false});
  auto on_tensor = RunOp(MakeNode("OptionalHasElement", 1, 1), 18, {Floats({1}, {1})});
  ASSERT_TRUE(on_tensor.ok());
  ExpectTensorNear<bool>(on_tensor->outputs[0].tensor(), {}, {true});
  auto on_seq = RunOp(MakeNode("OptionalHasElement", 1, 1), 18, {IntSeq({})});
  ASSERT_TRUE(on_seq.ok());
  ExpectTensorNear<bool>(on_seq->outputs[0].tensor(), {}, {true});
  // Opset 18 allows omitting the input (false); opset 15 requires it.
  auto omitted = RunOp(WithoutInput(MakeNode("OptionalHasElement", 1, 1), 0), 18, {Value()});
  ASSERT_TRUE(omitted.ok()) << omitted.status().ToString();
  ExpectTensorNear<bool>(omitted->outputs[0].tensor(), {}, {false});
  EXPECT_FALSE(RunOp(WithoutInput(MakeNode("OptionalHasElement", 1, 1), 0), 15, {Value()}).ok());
}

TEST(OptionalOps, GetElement) {
  auto from_tensor = RunOp(MakeNode("OptionalGetElement", 1, 1), 18, {Floats({3, 4}, {2})});
  ASSERT_TRUE(from_tensor.ok()) << from_tensor.status().ToString();
  ExpectTensorNear<float>(from_tensor->outputs[0].tensor(), {2}, {3, 4});
  auto from_seq = RunOp(MakeNode("OptionalGetElement", 1, 1), 18, {ThreeSeq()});
  ASSERT_TRUE(from_seq.ok());
  EXPECT_EQ(from_seq->outputs[0].elements().size(), 3u);
  auto from_none = RunOp(MakeNode("OptionalGetElement", 1, 1), 18, {Value::None(TypeInfo::Tensor(DataType::kFloat))});
  ASSERT_FALSE(from_none.ok());
  EXPECT_NE(from_none.status().message().find("empty optional"), std::string::npos);
  // The rule unwraps optional(tensor(float)).
  const OpSchema* schema = OpRegistry::Global().Resolve("", "OptionalGetElement", 15).value();
  Node node = MakeNode("OptionalGetElement", 1, 1);
  TypeInfo opt = TypeInfo::Optional(TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Known(2)}));
  InferenceContext ictx{node, 15, {&opt}, {nullptr}, {TypeInfo{}}, {std::nullopt}, nullptr};
  ASSERT_TRUE(schema->infer(ictx).ok());
  EXPECT_EQ(ictx.output_types[0].ToString(), "tensor(float)");
  EXPECT_EQ(ShapeToString(*ictx.output_types[0].shape), "[2]");
}

// ---- SequenceMap (body run by a fake subgraph runner) ------------------------------

class DoublingRunner : public SubgraphRunner {
 public:
  // Body (x, y) -> x * 2 + y, on int64 tensors (y broadcast as a scalar).
  Result<std::vector<Value>> Run(const Graph&, const std::vector<Value>& inputs) override {
    const Tensor& x = inputs[0].tensor();
    int64_t y = inputs[1].tensor().data<int64_t>()[0];
    Tensor out = Tensor::Allocate(DataType::kInt64, x.dims()).value();
    for (int64_t i = 0; i < x.num_elements(); ++i) out.data<int64_t>()[i] = x.data<int64_t>()[i] * 2 + y;
    return std::vector<Value>{out};
  }
};

TEST(Sequence, SequenceMapRunsTheBodyPerElement) {
  auto body = std::make_shared<Graph>();
  body->name = "double";
  body->inputs = {ValueInfo{"x", TypeInfo::Tensor(DataType::kInt64), {}, {}},
                  ValueInfo{"y", TypeInfo::Tensor(DataType::kInt64), {}, {}}};
  body->outputs = {ValueInfo{"z", TypeInfo::Tensor(DataType::kInt64), {}, {}}};
  Attribute attr;
  attr.name = "body";
  attr.type = AttrType::kGraph;
  attr.g = body;
  Node node = MakeNode("SequenceMap", 2, 1, {attr});
  const OpSchema* schema = OpRegistry::Global().Resolve("", "SequenceMap", 17).value();
  Value seq = ThreeSeq();
  Value y = Ints({100}, {});
  std::vector<Value> outputs(1);
  DoublingRunner runner;
  KernelContext ctx(node, 17, {&seq, &y}, &outputs, nullptr, nullptr, &runner);
  ASSERT_TRUE(schema->kernel(ctx).ok());
  // [x * 2 + 100 for x in ([1], [2,3], [4,5,6])]
  const auto& e = outputs[0].elements();
  ASSERT_EQ(e.size(), 3u);
  ExpectTensorNear<int64_t>(e[0].tensor(), {1}, {102});
  ExpectTensorNear<int64_t>(e[1].tensor(), {2}, {104, 106});
  ExpectTensorNear<int64_t>(e[2].tensor(), {3}, {108, 110, 112});
  // A second sequence input of another length is an error.
  Value short_seq = IntSeq({Ints({1}, {})});
  KernelContext bad(node, 17, {&seq, &short_seq}, &outputs, nullptr, nullptr, &runner);
  EXPECT_FALSE(schema->kernel(bad).ok());
}

}  // namespace
}  // namespace nee
