// How control-flow bodies run: their tensors' bytes come from the session's
// BlockCache and are reused once freed, constants are read in place and
// captured names are found without a lookup by name. What must hold: a
// Loop's scan outputs stay intact across many iterations (every iteration's
// bytes are reused only after the Loop stacked them), results are the same
// on every run and with runs in parallel.
#include <gtest/gtest.h>

#include <thread>

#include "../opt/opt_test_util.h"
#include "exec/block_cache.h"

namespace nee {
namespace {

using namespace opt_test;

Node MakeOp(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
            std::vector<Attribute> attrs = {}) {
  Node n;
  n.name = op + "_" + out[0];
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attrs);
  return n;
}

// y, scan = Loop(M, true, x0): per iteration x = -(-(x + one)) (a body
// constant; the Negs make short-lived tensors whose blocks come back), and
// the scan output is x * scale, `scale` captured from the main graph.
Model LoopModel() {
  auto body = std::make_shared<Graph>();
  body->name = "body";
  body->inputs = {{"i", TypeInfo::Tensor(DataType::kInt64, ShapeFromDims({})), "", {}},
                  {"c", TypeInfo::Tensor(DataType::kBool, ShapeFromDims({})), "", {}},
                  {"x", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({4})), "", {}}};
  body->initializers.push_back({"one", Floats({1, 1, 1, 1}, {4}), ""});
  body->nodes = {MakeOp("Add", {"x", "one"}, {"a"}), MakeOp("Neg", {"a"}, {"n"}), MakeOp("Neg", {"n"}, {"x_next"}),
                 MakeOp("Mul", {"x_next", "scale"}, {"s"}), MakeOp("Identity", {"c"}, {"c_next"})};
  body->outputs = {{"c_next", TypeInfo::Tensor(DataType::kBool, ShapeFromDims({})), "", {}},
                   {"x_next", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({4})), "", {}},
                   {"s", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({4})), "", {}}};
  Attribute attr;
  attr.name = "body";
  attr.type = AttrType::kGraph;
  attr.g = body;
  ModelBuilder b;
  b.Input("m", ShapeFromDims({}), DataType::kInt64)
      .Input("x0", ShapeFromDims({4}))
      .Init("scale", Floats({1, 2, 3, 4}, {4}))
      .Init("yes", Tensor::Scalar<bool>(true))
      .Op("Loop", {"m", "yes", "x0"}, {"y", "scan"}, {attr})
      .Output("y")
      .Output("scan");
  return b.model;
}

// Checks one run of LoopModel with M iterations from x0 = [0, 10, 20, 30].
void ExpectLoopResults(Session& session, int64_t m) {
  auto out = session.Run({{"m", Tensor::Scalar<int64_t>(m)}, {"x0", Floats({0, 10, 20, 30}, {4})}}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<float> last, scan;
  for (int64_t k = 1; k <= m; ++k)
    for (int j = 0; j < 4; ++j) scan.push_back((static_cast<float>(10 * j + k)) * static_cast<float>(j + 1));
  for (int j = 0; j < 4; ++j) last.push_back(static_cast<float>(10 * j + m));
  ExpectNear((*out)[0].tensor(), {4}, last);
  ExpectNear((*out)[1].tensor(), {m, 4}, scan);
}

std::unique_ptr<Session> MakeLoopSession(int level) {
  SessionOptions options;
  options.intra_op_num_threads = 1;
  options.graph_optimization_level = level;
  auto session = Session::Create(LoopModel(), options);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  return session.ok() ? std::move(session).value() : nullptr;
}

TEST(BodyExecution, ScanOutputsStayIntactOverManyIterations) {
  for (int level : {0, 99}) {
    auto session = MakeLoopSession(level);
    ASSERT_TRUE(session);
    for (int round = 0; round < 3; ++round) ExpectLoopResults(*session, 300);
    ExpectLoopResults(*session, 1);
  }
}

TEST(BodyExecution, ConcurrentRunsOfOneSessionAgree) {
  auto session = MakeLoopSession(0);
  ASSERT_TRUE(session);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&session, t] {
      for (int round = 0; round < 20; ++round) ExpectLoopResults(*session, 50 + t);
    });
  for (std::thread& t : threads) t.join();
}

TEST(BodyExecution, OutputsOutliveTheirSession) {
  auto session = MakeLoopSession(0);
  ASSERT_TRUE(session);
  auto out = session->Run({{"m", Tensor::Scalar<int64_t>(2)}, {"x0", Floats({0, 10, 20, 30}, {4})}}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  session.reset();  // the blocks' cache lives on while an output uses one
  ExpectNear((*out)[0].tensor(), {4}, {2, 12, 22, 32});
  EXPECT_TRUE((*out)[0].tensor().exclusively_owned());
}

// A count whose byte size wraps around must not pass for a small block.
TEST(BodyExecution, AnEnormousHeapTensorIsStillRefused) {
  ModelBuilder b;
  b.Input("s", ShapeFromDims({2}), DataType::kInt64).Op("ConstantOfShape", {"s"}, {"y"}).Output("y");
  auto session = Session::Create(b.model, SessionOptions{});
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  int64_t huge = int64_t{1} << 31;  // 2^62 floats: 2^64 bytes, 0 once wrapped
  auto out = (*session)->Run({{"s", Ints({huge, huge})}}, {});
  EXPECT_FALSE(out.ok());
  auto small = (*session)->Run({{"s", Ints({2, 3})}}, {});
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  ExpectNear((*small)[0].tensor(), {2, 3}, {0, 0, 0, 0, 0, 0});
}

TEST(BlockCache, AFreedBlockIsHandedOutAgainForItsSizeClass) {
  BlockCache cache;
  EXPECT_EQ(BlockCache::CapacityFor(0), 64u);
  EXPECT_EQ(BlockCache::CapacityFor(65), 128u);
  EXPECT_EQ(BlockCache::CapacityFor(BlockCache::kMaxBlockBytes), BlockCache::kMaxBlockBytes);
  EXPECT_FALSE(BlockCache::Serves(BlockCache::kMaxBlockBytes + 1));
  void* a = cache.Take(100);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % BlockCache::kAlignment, 0u);
  cache.Give(a, BlockCache::CapacityFor(100));
  EXPECT_EQ(cache.cached_bytes(), 128u);
  EXPECT_EQ(cache.Take(120), a);  // same class
  EXPECT_EQ(cache.cached_bytes(), 0u);
  void* b = cache.Take(100);  // the only one is taken: a new block
  EXPECT_NE(b, a);
  cache.Give(a, 128);
  cache.Give(b, 128);
  EXPECT_EQ(cache.cached_bytes(), 256u);
}

TEST(BlockCache, KeepsAtMostItsLimit) {
  BlockCache cache;
  std::vector<void*> blocks;
  const size_t n = BlockCache::kMaxCachedBytes / BlockCache::kMaxBlockBytes + 3;
  for (size_t i = 0; i < n; ++i) blocks.push_back(cache.Take(BlockCache::kMaxBlockBytes));
  for (void* p : blocks) cache.Give(p, BlockCache::kMaxBlockBytes);
  EXPECT_EQ(cache.cached_bytes(), BlockCache::kMaxCachedBytes);
}

}  // namespace
}  // namespace nee
