// The round trip of a cache line between two CPUs, in nanoseconds: two
// threads, pinned to the first two CPUs this process may run on, hand a
// counter back and forth. On this project's 2-vCPU virtual machine it reads
// about 100 ns when the host runs the two vCPUs in one core complex and about
// 450 ns when it places them farther apart, which it does for minutes at a
// time; two-thread timings taken in the second state run 5-15% slower (nee
// more than ONNX Runtime: its threads hand more data to each other).
// bench/compare.py prints it with every report. Not run by the tests.
//
//   build/bin/nee_core_latency [--rounds N]   ->  "round_trip_ns 102"
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

alignas(64) std::atomic<int64_t> g_turn{0};

bool Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// The first two CPUs of this process's affinity mask; false when it has one.
bool TwoCpus(int* first, int* second) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return false;
  int found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; ++cpu)
    if (CPU_ISSET(cpu, &set)) (found++ == 0 ? *first : *second) = cpu;
  return found == 2;
}

// Median over batches of `rounds` round trips each.
double MedianRoundTripNs(int first, int second, int64_t rounds, int batches) {
  std::vector<double> per_batch;
  for (int b = 0; b < batches; ++b) {
    g_turn.store(0);
    std::thread echo([&] {
      Pin(second);
      for (int64_t i = 0; i < rounds; ++i) {
        while (g_turn.load(std::memory_order_acquire) != 2 * i + 1) {
        }
        g_turn.store(2 * i + 2, std::memory_order_release);
      }
    });
    Pin(first);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < rounds; ++i) {
      g_turn.store(2 * i + 1, std::memory_order_release);
      while (g_turn.load(std::memory_order_acquire) != 2 * i + 2) {
      }
    }
    const auto stop = std::chrono::steady_clock::now();
    echo.join();
    per_batch.push_back(std::chrono::duration<double, std::nano>(stop - start).count() / static_cast<double>(rounds));
  }
  std::sort(per_batch.begin(), per_batch.end());
  return per_batch[per_batch.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rounds = 200000;  // ~20 ms a batch: thread start and pinning drown in it
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::max<int64_t>(1, std::atoll(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--rounds N]\n", argv[0]);
      return 2;
    }
  }
  int first = 0, second = 0;
  if (!TwoCpus(&first, &second)) {
    std::fprintf(stderr, "nee_core_latency: this process may run on one CPU only\n");
    return 1;
  }
  std::printf("round_trip_ns %.0f\n", MedianRoundTripNs(first, second, rounds, 5));
  return 0;
}
