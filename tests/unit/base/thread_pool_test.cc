// ThreadPool: loops cover every index once, with spinning on or off, and with
// spinning off (ONNX Runtime's session.intra_op.allow_spinning=0) idle
// workers sleep at once: the process uses no CPU after the loop.
#include "base/thread_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace nee {
namespace {

// User + system CPU time of the whole process (every thread), in seconds.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

int64_t SumOfIndices(ThreadPool& pool, int64_t n) {
  std::atomic<int64_t> sum{0};
  pool.ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) sum += i;
  });
  return sum.load();
}

TEST(ThreadPool, EveryIndexOnceWithAndWithoutSpinning) {
  for (bool spinning : {true, false}) {
    ThreadPool pool(3, spinning);
    EXPECT_EQ(pool.allow_spinning(), spinning);
    for (int round = 0; round < 20; ++round) EXPECT_EQ(SumOfIndices(pool, 1000), 999 * 1000 / 2);
  }
}

TEST(ThreadPool, WithoutSpinningIdleWorkersUseNoCpu) {
  ThreadPool pool(3, /*allow_spinning=*/false);
  ASSERT_EQ(SumOfIndices(pool, 100000), int64_t{99999} * 100000 / 2);
  const double before = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Two spinning workers would use up to 0.4 s here (each polls for 250 ms).
  EXPECT_LT(ProcessCpuSeconds() - before, 0.02);
  EXPECT_EQ(SumOfIndices(pool, 1000), 999 * 1000 / 2);  // and they wake for the next loop
}

}  // namespace
}  // namespace nee
