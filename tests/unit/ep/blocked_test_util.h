// What the channel-blocked layout's tests share (blocked_conv_fast_test.cc,
// blocked_stem_pool_test.cc): the reorders' reference kernels, the tolerance
// a fast conv keeps to the double-summing reference, and the run of
// BlockedConvFloat at every ISA limit and thread count.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ep_test_util.h"

namespace nee::testing {

// ToBlocked(t), or FromBlocked(t) back to `channels`, by the reference kernels.
inline Tensor Reorder(const char* op, const Tensor& t, int64_t channels) {
  std::vector<Attribute> attrs;
  if (std::string(op) == "FromBlocked") attrs.push_back(IntAttr("channels", channels));
  auto out = RunOp(MakeNode(op, 1, 1, attrs, "ai.nee"), 1, {Value(t)});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? out->outputs[0].tensor() : Tensor();
}

// A float conv's result against the reference's (which sums in double).
inline void ExpectClose(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const float r = want.data<float>()[i], f = got.data<float>()[i];
    ASSERT_NEAR(f, r, 2e-5f + 2e-5f * std::fabs(r)) << what << " at " << i;
  }
}

// BlockedConvFloat on `node` at the AVX2 limit and then unlimited (the best this CPU has), at 1, 2 and 3
// threads each: every result close to `want`, and at each limit the same bytes at every thread count.
// Returns the unlimited single-thread result (the limit is left unlimited).
inline Tensor ExpectFastCloseAtEveryIsaAndThreadCount(const Node& node, const std::vector<Value>& in,
                                                      const Tensor& want, const std::string& what) {
  Tensor first;
  for (cpu::SgemmIsa isa : {cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kAvx512}) {
    cpu::SgemmLimitIsa(isa);
    for (int threads : {1, 2, 3}) {
      auto got = RunKernel(cpu::BlockedConvFloat, node, 1, in, threads);
      EXPECT_TRUE(got.ok()) << got.status().ToString();
      if (!got.ok()) break;
      ExpectClose(*got, want, what);
      if (threads == 1) first = *got;
      else ExpectBitwise(*got, first, what + " threads " + std::to_string(threads));
    }
  }
  cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
  return first;
}

}  // namespace nee::testing
