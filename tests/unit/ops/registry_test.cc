#include <gtest/gtest.h>

#include "ops/op_registry.h"

namespace nee {
namespace {

Status DummyKernel(KernelContext&) { return Status::Ok(); }

TEST(OpRegistry, ResolvesTheVersionInForce) {
  OpRegistry r;
  r.RegisterVersions("", "Foo", {7, 13}, 1, 1, 1, 1, nullptr, DummyKernel);
  auto at12 = r.Resolve("", "Foo", 12);
  ASSERT_TRUE(at12.ok());
  EXPECT_EQ(at12.value()->since_version, 7);
  auto at18 = r.Resolve("ai.onnx", "Foo", 18);
  ASSERT_TRUE(at18.ok());
  EXPECT_EQ(at18.value()->since_version, 13);
  auto at6 = r.Resolve("", "Foo", 6);
  ASSERT_FALSE(at6.ok());
  EXPECT_EQ(at6.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(at6.status().message().find("introduced in opset 7"), std::string::npos);
  auto unknown = r.Resolve("", "Bar", 13);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotImplemented);
}

}  // namespace
}  // namespace nee

namespace nee {
namespace {

TEST(OpRegistry, EveryOpIsRegisteredByExactlyOneFamily) {
  const OpRegistry& r = OpRegistry::Global();
  EXPECT_TRUE(r.duplicates().empty()) << "first duplicate: " << r.duplicates().front();
  // Every entry has a shape rule, and a kernel unless it is a pure decomposition.
  for (const auto& [name, versions] : r.List()) {
    // "ai.onnx.ml.TreeEnsemble", "com.microsoft.QLinearAdd": the domain is all before the last dot.
    std::string domain = name.find('.') != std::string::npos ? name.substr(0, name.rfind('.')) : "";
    std::string op = domain.empty() ? name : name.substr(domain.size() + 1);
    for (int v : versions) {
      auto s = r.Resolve(domain, op, v);
      ASSERT_TRUE(s.ok()) << name << " " << v << ": " << s.status().ToString();
      EXPECT_NE(s.value()->kernel, nullptr) << name << "-" << v;
    }
  }
  EXPECT_GT(r.num_ops(), 200u);
}

}  // namespace
}  // namespace nee
