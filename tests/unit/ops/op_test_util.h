// Runs one operator outside a session: resolves its schema, runs its shape
// rule on the inputs' concrete types, runs its reference kernel, and checks
// that the rule's output types agree with what the kernel produced.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "ops/op_registry.h"

namespace nee::testing {

struct OpRun {
  std::vector<Value> outputs;
  std::vector<TypeInfo> inferred;
};

Attribute IntAttr(const std::string& name, int64_t v);
Attribute FloatAttr(const std::string& name, float v);
Attribute StringAttr(const std::string& name, const std::string& v);
Attribute IntsAttr(const std::string& name, std::vector<int64_t> v);
Attribute FloatsAttr(const std::string& name, std::vector<float> v);
Attribute StringsAttr(const std::string& name, std::vector<std::string> v);
Attribute TensorAttr(const std::string& name, Tensor t);

// Builds a node named "test" with inputs in0.. and outputs out0...
Node MakeNode(const std::string& op_type, size_t num_inputs, size_t num_outputs,
              std::vector<Attribute> attributes = {}, const std::string& domain = "");

// `inputs` may contain empty Values for omitted optional inputs.
Result<OpRun> RunOp(const Node& node, int64_t opset, const std::vector<Value>& inputs,
                    int num_threads = 1);

// Runs a one-output op built by MakeNode (empty Values in `inputs` are omitted
// optional inputs) and returns its output. A failure fails the test and gives
// an undefined tensor.
Tensor RunOne(const std::string& op, int64_t opset, const std::vector<Value>& inputs,
              std::vector<Attribute> attrs = {}, int threads = 1);
// Runs a one-output op that is expected to fail; returns its error (Ok when it ran).
Status RunError(const std::string& op, int64_t opset, const std::vector<Value>& inputs,
                std::vector<Attribute> attrs = {});

// Expects each (op, since-versions) pair of the default domain to resolve, at
// every listed opset, to a schema of exactly that since-version with a shape
// rule and a kernel.
void ExpectRegisteredVersions(const std::vector<std::pair<std::string, std::vector<int>>>& op_versions);

template <typename T>
void ExpectTensorNear(const Tensor& actual, const std::vector<int64_t>& dims,
                      const std::vector<T>& expected, double tol = 1e-5) {
  ASSERT_EQ(actual.dtype(), DataTypeOf<T>::value);
  ASSERT_EQ(actual.dims(), dims);
  ASSERT_EQ(static_cast<size_t>(actual.num_elements()), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(expected[i])) {
        EXPECT_TRUE(std::isnan(actual.data<T>()[i])) << "at " << i;
      } else if (std::isinf(expected[i])) {
        EXPECT_EQ(actual.data<T>()[i], expected[i]) << "at " << i;
      } else {
        EXPECT_NEAR(actual.data<T>()[i], expected[i], tol * (1 + std::fabs(expected[i]))) << "at " << i;
      }
    } else {
      EXPECT_EQ(actual.data<T>()[i], expected[i]) << "at " << i;
    }
  }
}

}  // namespace nee::testing
