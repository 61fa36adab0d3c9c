// Concurrent use of one session and of the thread pool: the tests the
// ThreadSanitizer build runs (scripts/sanitize.sh), and a soak when
// NEE_SOAK_RUNS is set. Results of concurrent runs must equal, bitwise, those
// of sequential runs with the same inputs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../paths_util.h"
#include "base/thread_pool.h"
#include "exec/session.h"
#include "format/npy.h"

namespace nee {
namespace {

std::string ModelDir(const std::string& name) { return std::string(NEE_TEST_DATA_DIR) + "/models/torch/" + name; }

// The first `batch` rows of `t` (its first dim is the batch).
Tensor FirstRows(const Tensor& t, int64_t batch) {
  std::vector<int64_t> dims = t.dims();
  size_t row_bytes = t.byte_size() / static_cast<size_t>(dims[0]);
  dims[0] = batch;
  Tensor out = Tensor::Allocate(t.dtype(), dims).value();
  std::memcpy(out.raw_data(), t.raw_data(), row_bytes * static_cast<size_t>(batch));
  return out;
}

bool SameBytes(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor& x = a[i].tensor();
    const Tensor& y = b[i].tensor();
    if (x.dims() != y.dims() || x.dtype() != y.dtype()) return false;
    if (std::memcmp(x.raw_data(), y.raw_data(), x.byte_size()) != 0) return false;
  }
  return true;
}

// Several caller threads share one session (itself with 2 intra-op threads,
// so runs also contend for its pool) and feed batches of mixed sizes, which
// makes them share and create shape plans and pooled arenas concurrently.
void RunConcurrently(const std::string& model, int callers, int runs_per_caller) {
  SessionOptions options;
  options.intra_op_num_threads = 2;
  auto session = Session::CreateFromFile(ModelDir(model) + "/model.onnx", options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto input = ReadNpyFile(ModelDir(model) + "/input_0.npy");
  ASSERT_TRUE(input.ok()) << input.status().message();
  const std::string name = session.value()->inputs()[0].name;
  const int64_t full_batch = input.value().dim(0);

  std::vector<std::vector<Value>> expected;  // per batch size 1..full_batch
  for (int64_t b = 1; b <= full_batch; ++b) {
    auto out = session.value()->Run({{name, Value(FirstRows(input.value(), b))}}, {});
    ASSERT_TRUE(out.ok()) << out.status().message();
    expected.push_back(std::move(out.value()));
  }

  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c) {
    threads.emplace_back([&, c] {
      for (int r = 0; r < runs_per_caller; ++r) {
        int64_t b = 1 + (c + r) % full_batch;
        auto out = session.value()->Run({{name, Value(FirstRows(input.value(), b))}}, {});
        if (!out.ok()) {
          failures++;
        } else if (!SameBytes(out.value(), expected[static_cast<size_t>(b - 1)])) {
          mismatches++;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

int SoakRuns(int otherwise) {
  const char* env = std::getenv("NEE_SOAK_RUNS");
  return env ? std::atoi(env) : otherwise;
}

TEST(Concurrency, CnnSessionSharedByFourCallers) { RunConcurrently("cnn_opset13", 4, SoakRuns(6)); }

TEST(Concurrency, TransformerSessionSharedByFourCallers) {
  RunConcurrently("transformer_opset13", 4, SoakRuns(4));
}

// Resident set size in bytes (Linux /proc/self/statm), 0 when unknown.
int64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long pages = 0, resident = 0;
  int read = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return read == 2 ? static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE) : 0;
}

// One session, 8 caller threads, NEE_SOAK_RUNS runs in all (default 800)
// with batch sizes mixed: every result equals the sequential one, and the
// resident memory after the first tenth of the runs (warm-up: plans,
// arenas, pools) stays flat to the end.
TEST(Soak, EightCallersResultsEqualAndMemoryFlat) {
  const int total = SoakRuns(800);
  SessionOptions options;
  options.intra_op_num_threads = 2;
  auto session = Session::CreateFromFile(ModelDir("cnn_opset13") + "/model.onnx", options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto input = ReadNpyFile(ModelDir("cnn_opset13") + "/input_0.npy");
  ASSERT_TRUE(input.ok());
  const std::string name = session.value()->inputs()[0].name;
  const int64_t full_batch = input.value().dim(0);
  std::vector<std::vector<Value>> expected;
  for (int64_t b = 1; b <= full_batch; ++b)
    expected.push_back(session.value()->Run({{name, Value(FirstRows(input.value(), b))}}, {}).value());

  std::atomic<int> next{0}, mismatches{0}, failures{0};
  std::atomic<int64_t> rss_after_warmup{0};
  auto worker = [&] {
    for (int r = next++; r < total; r = next++) {
      if (r == total / 10) rss_after_warmup = ResidentBytes();
      int64_t b = 1 + r % full_batch;
      auto out = session.value()->Run({{name, Value(FirstRows(input.value(), b))}}, {});
      if (!out.ok()) failures++;
      else if (!SameBytes(out.value(), expected[static_cast<size_t>(b - 1)])) mismatches++;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  const int64_t growth = ResidentBytes() - rss_after_warmup.load();
  std::printf("soak: %d runs on 8 threads, RSS %+.2f MiB after warm-up\n", total, growth / 1048576.0);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)growth;  // ASan's quarantine and TSan's shadow keep freed memory resident by design
#elif defined(__has_feature)
#if !__has_feature(address_sanitizer) && !__has_feature(thread_sanitizer)
  EXPECT_LT(growth, int64_t{16} << 20);  // flat: a leak of even 2 KB per run would show over 10,000
#endif
#else
  EXPECT_LT(growth, int64_t{16} << 20);
#endif
}

TEST(Concurrency, ThreadPoolUsedFromSeveralThreadsAtOnce) {
  ThreadPool pool(3);
  constexpr int64_t kN = 10000;
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        std::vector<int64_t> out(kN, 0);
        pool.ParallelFor(kN, 16, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) out[static_cast<size_t>(i)] = i * 2;
        });
        for (int64_t i = 0; i < kN; ++i)
          if (out[static_cast<size_t>(i)] != i * 2) wrong++;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace nee
