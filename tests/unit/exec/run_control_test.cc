#include "exec/run_control.h"

#include <gtest/gtest.h>

#include <thread>

namespace nee {
namespace {

TEST(RunControl, GoesOnUntilTerminatedThenSaysWhy) {
  RunOptions options;
  RunControl control(options.terminate_flag(), 0);
  EXPECT_TRUE(control.Check().ok());
  options.SetTerminate(true);
  Status st = control.Check();
  EXPECT_EQ(st.code(), StatusCode::kCancelled);
  EXPECT_NE(st.message().find("terminated"), std::string::npos);
  options.SetTerminate(false);
  EXPECT_TRUE(control.Check().ok());
}

TEST(RunControl, StopsAfterItsTimeLimit) {
  RunControl control(nullptr, 20);
  EXPECT_TRUE(control.Check().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  Status st = control.Check();
  EXPECT_EQ(st.code(), StatusCode::kCancelled);
  EXPECT_NE(st.message().find("time limit of 20 ms"), std::string::npos);
}

TEST(RunControl, NoLimitNeverStops) {
  RunControl control(nullptr, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(control.Check().ok());
}

TEST(MemoryBudget, RefusesWhatWouldExceedTheLimitAndForgetsTheRefusal) {
  MemoryBudget budget(100 << 20);
  EXPECT_TRUE(budget.Reserve(60 << 20).ok());
  Status st = budget.Reserve(50 << 20);
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory);
  EXPECT_NE(st.message().find("memory limit of 100 MiB"), std::string::npos);
  EXPECT_EQ(budget.live(), 60 << 20);  // the refused request is not counted
  budget.Release(60 << 20);
  EXPECT_TRUE(budget.Reserve(100 << 20).ok());
}

TEST(MemoryBudget, UnlimitedStillCounts) {
  MemoryBudget budget(0);
  EXPECT_TRUE(budget.Reserve(int64_t{1} << 50).ok());
  EXPECT_EQ(budget.live(), int64_t{1} << 50);
}

}  // namespace
}  // namespace nee
