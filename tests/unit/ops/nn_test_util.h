// Helpers shared by the nn op tests (matmul, conv, pool, normalization,
// softmax). Inputs follow a deterministic pattern that nn_expected_gen.py
// reproduces in numpy, so only the expected outputs are pasted.
#pragma once
#include <string>
#include <vector>

#include "ir/float_formats.h"
#include "op_test_util.h"

namespace nee::testing {

// Element i is ((i % mod) - offset) * scale, as P() in nn_expected_gen.py.
template <typename T = float>
Tensor Pattern(std::vector<int64_t> dims, int mod = 7, int offset = 3, double scale = 0.5) {
  Tensor t = Tensor::Allocate(DataTypeOf<T>::value, dims).value();
  for (int64_t i = 0; i < t.num_elements(); ++i)
    t.data<T>()[i] = static_cast<T>(((i % mod) - offset) * scale);
  return t;
}

// A float16 (or bfloat16) tensor holding the given values.
inline Tensor HalfTensor(const std::vector<float>& values, std::vector<int64_t> dims, bool bfloat = false) {
  Tensor t = Tensor::Allocate(bfloat ? DataType::kBFloat16 : DataType::kFloat16, std::move(dims)).value();
  for (size_t i = 0; i < values.size(); ++i)
    t.data<uint16_t>()[i] = bfloat ? FloatToBFloat16(values[i]) : FloatToHalf(values[i]);
  return t;
}

inline std::vector<float> HalfValues(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.num_elements(); ++i)
    v.push_back(t.dtype() == DataType::kBFloat16 ? BFloat16ToFloat(t.data<uint16_t>()[i])
                                                 : HalfToFloat(t.data<uint16_t>()[i]));
  return v;
}

inline std::vector<float> PatternValues(int64_t n, int mod = 7, int offset = 3, double scale = 0.5) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>(((i % mod) - offset) * scale));
  return v;
}

// Runs op and expects an error whose message contains `needle` and names the node.
inline void ExpectOpError(const Node& node, int64_t opset, const std::vector<Value>& inputs, const std::string& needle) {
  auto r = RunOp(node, opset, inputs);
  ASSERT_FALSE(r.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("'test'"), std::string::npos) << r.status().message();
}

}  // namespace nee::testing

namespace nee::testing {

// Runs only the shape rule of `node` on the given input types.
inline Result<std::vector<TypeInfo>> InferOnly(const Node& node, int64_t opset, const std::vector<TypeInfo>& inputs) {
  NEE_ASSIGN_OR_RETURN(const OpSchema* schema, OpRegistry::Global().Resolve(node.domain, node.op_type, opset));
  InferenceContext ictx{node, opset, {}, {}, {}, {}, nullptr};
  for (const TypeInfo& t : inputs) {
    ictx.input_types.push_back(&t);
    ictx.input_values.push_back(nullptr);
  }
  ictx.output_types.resize(node.outputs.size());
  ictx.output_values.resize(node.outputs.size());
  NEE_RETURN_IF_ERROR(schema->infer(ictx));
  return ictx.output_types;
}

inline TypeInfo FloatType(Shape shape) { return TypeInfo::Tensor(DataType::kFloat, std::move(shape)); }

}  // namespace nee::testing
