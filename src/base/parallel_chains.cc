#include "base/parallel_chains.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>

#include "base/thread_pool.h"

namespace nee {

namespace {

// How a thread with nothing left waits for a chain another thread holds: it
// asks for the chain and polls, so that it can carry on the moment the
// holder ends its link. It withdraws and leaves (the holder finishes the
// chain; the pool's caller waits for it as for any chunk) after kMaxPoll,
// about as long as the pool's caller polls for a worker's last chunk (20000
// PAUSEs, ~0.55 ms here); at once when it runs on the holder's CPU (polling
// would take the holder's time); and when it finds it lost its CPU for a
// while (kPreempted: its CPU is shared, and a request standing while it
// does not run could hand the chain to a thread that is not running). It
// never yields the CPU: on a loaded machine a yield gives it to another
// process for a whole time slice, just when the holder may offer the chain.
constexpr std::chrono::microseconds kMaxPoll{500};
constexpr int kPollsPerClockRead = 256;
constexpr std::chrono::microseconds kPreempted{100};
// How long a holder that hands its chain over waits for the asker to claim
// it (a polling asker sees the offer within a microsecond or two).
constexpr std::chrono::microseconds kHandOverWindow{20};

// A chain's progress in one word: 2 * (the next link to run) while free,
// 2 * (the link running) + 1 while a thread holds the chain, 2 * links when
// finished.
struct alignas(64) Chain {
  std::atomic<int> state{0};
  // Set by a thread that has nothing left to run: the holder hands the chain
  // over after its current link.
  std::atomic<bool> wanted{false};
  // The CPU the holder last ran a link on (-1: unknown): a thread on the same
  // CPU waits asleep, since polling would take the holder's time.
  std::atomic<int> holder_cpu{-1};
};

class ChainRun {
 public:
  ChainRun(int64_t chains, int64_t links, const std::function<void(int64_t, int64_t)>& fn)
      : chains_(std::make_unique<Chain[]>(static_cast<size_t>(chains))), count_(chains), links_(links), fn_(fn) {}

  // One thread's part: its share of the chains, then any unstarted one, then
  // (when it has run links itself) the chains others still hold, by hand-over.
  void Run(int64_t runner, int64_t runners) {
    const int64_t first = count_ * runner / runners;
    bool worked = false;
    for (int64_t k = 0; k < count_; ++k) {
      const int64_t c = (first + k) % count_;
      int link;
      while (TryClaim(c, &link)) {
        worked = true;
        if (!RunHeld(c, link)) return;
      }
    }
    // A thread that ran nothing started late: the others are the faster ones.
    if (!worked) return;
    for (int64_t k = 0; k < count_; ++k)
      if (!TakeOver((first + k) % count_)) return;
  }

 private:
  int Finished() const { return static_cast<int>(2 * links_); }

  // Claims chain c if no thread holds it and links remain; *link: its next.
  bool TryClaim(int64_t c, int* link) {
    std::atomic<int>& state = chains_[c].state;
    int s = state.load(std::memory_order_acquire);
    if ((s & 1) || s == Finished()) return false;
    if (!state.compare_exchange_strong(s, s + 1, std::memory_order_acq_rel)) return false;
    *link = s / 2;
    return true;
  }

  // Runs the held chain c from `link` on. False when it handed the chain over
  // (the thread then leaves: asking for a chain back would only bounce it).
  bool RunHeld(int64_t c, int link) {
    Chain& chain = chains_[c];
    for (;;) {
      chain.holder_cpu.store(CurrentCpu(), std::memory_order_relaxed);
      fn_(c, link);
      ++link;
      if (link == links_) {
        chain.state.store(Finished(), std::memory_order_release);
        return true;
      }
      if (chain.wanted.load(std::memory_order_relaxed)) {
        chain.wanted.store(false, std::memory_order_relaxed);
        if (HandOver(chain.state, link)) return false;
      } else {
        // Still held; the link number tells an asker how far behind it is.
        chain.state.store(2 * link + 1, std::memory_order_relaxed);
      }
    }
  }

  // Whether a chain whose holder runs link `running` is far enough behind to
  // be worth taking over: a quarter of its links or more still to come after
  // that one. Threads that started together and ran at the same speed end
  // within a link or two of each other (the later one started a wake-up
  // later), and moving a chain's last links to the other core only costs
  // (its data is in the holder's caches); a holder at half speed, its core
  // shared with another process, has half its chain left.
  bool WorthTakingOver(int running) const {
    return links_ - 1 - running >= std::max<int64_t>(2, links_ / 4);
  }

  // Offers the held chain's next link to the thread that asked for it, and
  // takes it back (false) when that thread does not claim it within
  // kHandOverWindow: it asked, then lost its core (another process ran
  // there) or left, and handing the chain to a thread that is not running
  // would stop the chain until the scheduler runs it again.
  static bool HandOver(std::atomic<int>& state, int link) {
    const int offered = 2 * link;
    state.store(offered, std::memory_order_release);
    const auto until = std::chrono::steady_clock::now() + kHandOverWindow;
    do {
      for (int i = 0; i < 16; ++i) {
        if (state.load(std::memory_order_relaxed) != offered) return true;
        CpuRelax();
      }
    } while (std::chrono::steady_clock::now() < until);
    int expected = offered;
    return !state.compare_exchange_strong(expected, offered + 1, std::memory_order_acq_rel);
  }

  // Polls for chain c to be handed over (or finished); false when this thread
  // should leave: it handed the chain on after taking it, or stopped polling
  // (the holder then finishes the chain, and the pool's caller waits for it
  // as for any chunk).
  bool TakeOver(int64_t c) {
    Chain& chain = chains_[c];
    const auto poll_until = std::chrono::steady_clock::now() + kMaxPoll;
    for (;;) {
      const int s = chain.state.load(std::memory_order_acquire);
      if (s == Finished()) return true;
      int link;
      if (!(s & 1)) {
        if (TryClaim(c, &link) && !RunHeld(c, link)) return false;
        continue;
      }
      if (!WorthTakingOver(s / 2)) return false;
      chain.wanted.store(true, std::memory_order_relaxed);
      if (!PollWhile(chain, s, poll_until)) {
        // Should the holder offer the chain before seeing this, it takes it
        // back when nobody claims it (HandOver).
        chain.wanted.store(false, std::memory_order_relaxed);
        return false;
      }
    }
  }

  // Polls until the chain's state differs from `value` (true) or polling
  // should stop (false): past `until`, on the holder's CPU, or after this
  // thread lost its core for a while.
  static bool PollWhile(const Chain& chain, int value, std::chrono::steady_clock::time_point until) {
    auto last = std::chrono::steady_clock::now();
    for (;;) {
      const int cpu = CurrentCpu();
      if (cpu >= 0 && cpu == chain.holder_cpu.load(std::memory_order_relaxed)) return false;
      for (int i = 0; i < kPollsPerClockRead; ++i) {
        if (chain.state.load(std::memory_order_acquire) != value) return true;
        CpuRelax();
      }
      const auto now = std::chrono::steady_clock::now();
      if (now - last > kPreempted || now > until) return false;
      last = now;
    }
  }

  std::unique_ptr<Chain[]> chains_;
  const int64_t count_;
  const int64_t links_;
  const std::function<void(int64_t, int64_t)>& fn_;
};

}  // namespace

void ParallelChains(ThreadPool* pool, int64_t chains, int64_t links,
                    const std::function<void(int64_t, int64_t)>& fn) {
  if (chains <= 0 || links <= 0) return;
  const int64_t runners = pool ? std::min<int64_t>(pool->num_threads(), chains) : 1;
  // The state word holds 2 * links + 1.
  if (runners <= 1 || links >= (int64_t{1} << 29)) {
    for (int64_t c = 0; c < chains; ++c)
      for (int64_t l = 0; l < links; ++l) fn(c, l);
    return;
  }
  ChainRun run(chains, links, fn);
  pool->ParallelFor(runners, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) run.Run(r, runners);
  });
}

}  // namespace nee
