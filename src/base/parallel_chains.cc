#include "base/parallel_chains.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "base/thread_pool.h"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <time.h>
#endif

namespace nee {

namespace {

// How a thread with nothing left waits for a chain another thread holds: it
// asks for the chain and polls, so that it can carry on the moment the
// holder ends its link. It withdraws and leaves (the holder finishes the
// chain; the pool's caller waits for it as for any chunk) after kMaxPoll,
// about as long as the pool's caller polls for a worker's last chunk (20000
// PAUSEs, ~0.55 ms here), or kMaxPollRunning while the holder is seen
// running (a holder seen not running is moved instead, see TakeOver); at once when it runs on the holder's CPU (polling
// would take the holder's time); and when it finds it lost its CPU for a
// while (kPreempted: its CPU is shared, and a request standing while it
// does not run could hand the chain to a thread that is not running). It
// never yields the CPU: on a loaded machine a yield gives it to another
// process for a whole time slice, just when the holder may offer the chain.
constexpr std::chrono::microseconds kMaxPoll{500};
constexpr int kPollsPerClockRead = 256;
constexpr std::chrono::microseconds kPreempted{100};
// While the holder is seen running (its thread's CPU clock advances), the
// asker polls on past kMaxPoll, up to kMaxPollRunning: the hand-over comes
// within a link. Every kHolderCheck it compares the holder's CPU time with
// the time gone by: a holder that ran for less than a quarter of it lost its
// core (on this VM another process then keeps it for a whole slice, ~4 ms).
constexpr std::chrono::microseconds kMaxPollRunning{5000};
constexpr std::chrono::microseconds kHolderCheck{60};
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
  // The runner (Run's index) holding the chain, so that an asker can tell
  // whether its thread is running and move it (see ChainRun::TakeOver).
  std::atomic<int> holder_runner{-1};
  // Threads asleep until the chain is finished: the finishing holder wakes them.
  std::atomic<int> sleepers{0};
};

// One runner's thread as the others see it while it runs Run: its CPU-time
// clock, and what a move to another CPU changed (ChainRun::MoveHere).
struct alignas(64) RunnerThread {
  std::mutex mu;  // guards `inside`, `moved`, `saved` and the move itself
  bool inside = false;
#if defined(__linux__)
  pthread_t thread{};
  clockid_t clock{};
  bool has_clock = false;
  bool moved = false;
  cpu_set_t saved{};  // its affinity before the move
#endif
};

// How polling for a held chain ended.
enum class Poll { kChanged, kLeave, kHolderStalled };

class ChainRun {
 public:
  ChainRun(int64_t chains, int64_t links, int64_t runners, const std::function<void(int64_t, int64_t)>& fn)
      : chains_(std::make_unique<Chain[]>(static_cast<size_t>(chains))),
        threads_(std::make_unique<RunnerThread[]>(static_cast<size_t>(runners))),
        count_(chains),
        links_(links),
        fn_(fn) {}

  // One thread's part: its share of the chains, then any unstarted one, then
  // (when it has run links itself) the chains others still hold, by hand-over.
  void Run(int64_t runner, int64_t runners) {
    // Leave runs however RunChains ends (a moved thread must get its
    // affinity back).
    struct Inside {
      ChainRun& run;
      int64_t runner;
      ~Inside() { run.Leave(runner); }
    };
    Enter(runner);
    Inside inside{*this, runner};
    RunChains(runner, runners);
  }

 private:
  int Finished() const { return static_cast<int>(2 * links_); }

  void RunChains(int64_t runner, int64_t runners) {
    const int64_t first = count_ * runner / runners;
    bool worked = false;
    for (int64_t k = 0; k < count_; ++k) {
      const int64_t c = (first + k) % count_;
      int link;
      while (TryClaim(c, &link)) {
        worked = true;
        if (!RunHeld(c, link, runner)) return;
      }
    }
    // A thread that ran nothing started late: the others are the faster ones.
    if (!worked) return;
    for (int64_t k = 0; k < count_; ++k)
      if (!TakeOver((first + k) % count_, runner)) return;
  }

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
  bool RunHeld(int64_t c, int link, int64_t runner) {
    Chain& chain = chains_[c];
    chain.holder_runner.store(static_cast<int>(runner), std::memory_order_release);
    for (;;) {
      chain.holder_cpu.store(CurrentCpu(), std::memory_order_relaxed);
      fn_(c, link);
      ++link;
      if (link == links_) {
        // seq_cst, as the sleepers' count: a thread going to sleep either
        // sees the chain finished or is seen and woken.
        chain.state.store(Finished(), std::memory_order_seq_cst);
        if (chain.sleepers.load(std::memory_order_seq_cst) > 0) chain.state.notify_all();
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
  // as for any chunk). A holder that lost its core (its CPU is shared with
  // another process, which keeps it for a whole time slice: ~4 ms on this
  // VM, where the whole forest takes 6) would hold everyone up until it gets
  // the core back; instead this thread, whose CPU is free, moves the holder
  // onto its own CPU and sleeps there until the chain is finished, so the
  // holder runs on at once (MoveHere).
  bool TakeOver(int64_t c, int64_t runner) {
    Chain& chain = chains_[c];
    const auto poll_start = std::chrono::steady_clock::now();
    for (;;) {
      const int s = chain.state.load(std::memory_order_acquire);
      if (s == Finished()) return true;
      int link;
      if (!(s & 1)) {
        if (TryClaim(c, &link) && !RunHeld(c, link, runner)) return false;
        continue;
      }
      if (!WorthTakingOver(s / 2)) return false;
      chain.wanted.store(true, std::memory_order_relaxed);
      const Poll poll = PollWhile(chain, s, poll_start);
      if (poll == Poll::kChanged) continue;
      // Should the holder offer the chain before seeing this, it takes it
      // back when nobody claims it (HandOver).
      chain.wanted.store(false, std::memory_order_relaxed);
      const int holder = chain.holder_runner.load(std::memory_order_acquire);
      if (poll == Poll::kLeave || !MoveHere(holder, runner)) return false;
      SleepUntilFinished(chain);
      // The holder, on this CPU now, still has to leave Run and the pool's
      // chunk; yielding lets it, where spinning on (as the pool's caller does
      // for a worker it believes elsewhere) would keep it off the CPU.
      while (StillMoved(holder)) std::this_thread::yield();
    }
  }

  // Polls until the chain's state differs from `value` (kChanged) or polling
  // should stop: on the holder's CPU, after this thread lost its core for a
  // while, past kMaxPoll from `start` unless the holder was seen running
  // (then kMaxPollRunning) (kLeave); when the holder is seen not running
  // (kHolderStalled).
  Poll PollWhile(const Chain& chain, int value, std::chrono::steady_clock::time_point start) const {
    auto last = std::chrono::steady_clock::now();
    const int holder = chain.holder_runner.load(std::memory_order_acquire);
    auto window_start = last;
    int64_t holder_cpu_ns = HolderCpuTimeNs(holder);
    bool holder_running = false;
    for (;;) {
      const int cpu = CurrentCpu();
      if (cpu >= 0 && cpu == chain.holder_cpu.load(std::memory_order_relaxed)) return Poll::kLeave;
      for (int i = 0; i < kPollsPerClockRead; ++i) {
        if (chain.state.load(std::memory_order_acquire) != value) return Poll::kChanged;
        CpuRelax();
      }
      const auto now = std::chrono::steady_clock::now();
      if (now - last > kPreempted) return Poll::kLeave;
      last = now;
      if (holder_cpu_ns >= 0 && now - window_start >= kHolderCheck) {
        const int64_t cpu_ns = HolderCpuTimeNs(holder);
        const int64_t wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - window_start).count();
        if (cpu_ns >= 0 && 4 * (cpu_ns - holder_cpu_ns) < wall_ns) return Poll::kHolderStalled;
        holder_running = true;
        holder_cpu_ns = cpu_ns;
        window_start = now;
      }
      if (now - start > (holder_running ? kMaxPollRunning : kMaxPoll)) return Poll::kLeave;
    }
  }

  // The runner's thread: known to the others while it runs Run.
  void Enter(int64_t runner) {
    RunnerThread& me = threads_[runner];
    std::lock_guard<std::mutex> lock(me.mu);
    me.inside = true;
#if defined(__linux__)
    me.thread = pthread_self();
    me.has_clock = pthread_getcpuclockid(me.thread, &me.clock) == 0;
#endif
  }

  // Leaving Run: a thread moved to another CPU gets its affinity back.
  void Leave(int64_t runner) {
    RunnerThread& me = threads_[runner];
    std::lock_guard<std::mutex> lock(me.mu);
    me.inside = false;
#if defined(__linux__)
    if (me.moved) pthread_setaffinity_np(me.thread, sizeof me.saved, &me.saved);
    me.moved = false;
#endif
  }

  // The CPU time runner `holder`'s thread has used, in ns; -1 when unknown.
  // Its clock and thread are set before it holds any chain (Enter, then the
  // release store of holder_runner) and stay valid while the run lasts.
  int64_t HolderCpuTimeNs(int holder) const {
#if defined(__linux__)
    if (holder < 0) return -1;
    const RunnerThread& t = threads_[holder];
    timespec ts;
    if (!t.has_clock || clock_gettime(t.clock, &ts) != 0) return -1;
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
#else
    (void)holder;
    return -1;
#endif
  }

  // Moves runner `holder`'s thread onto this thread's CPU (it gets its own
  // affinity back when it leaves Run); false where that is not possible: it
  // left Run, it is this thread, or the affinity cannot be set.
  bool MoveHere(int holder, int64_t runner) {
#if defined(__linux__)
    if (holder < 0 || holder == runner) return false;
    RunnerThread& t = threads_[holder];
    std::lock_guard<std::mutex> lock(t.mu);
    const int cpu = CurrentCpu();
    if (!t.inside || t.moved || cpu < 0 || pthread_equal(t.thread, pthread_self())) return false;
    CPU_ZERO(&t.saved);
    // Its own mask may leave this CPU out (a pool worker keeps off its
    // caller's CPU, see thread_pool.cc): this thread runs here, so the process
    // may, and the kernel refuses a CPU outside its cpuset.
    if (pthread_getaffinity_np(t.thread, sizeof t.saved, &t.saved) != 0) return false;
    cpu_set_t here;
    CPU_ZERO(&here);
    CPU_SET(cpu, &here);
    if (pthread_setaffinity_np(t.thread, sizeof here, &here) != 0) return false;
    t.moved = true;
    return true;
#else
    (void)holder;
    (void)runner;
    return false;
#endif
  }

  bool StillMoved(int holder) {
#if defined(__linux__)
    RunnerThread& t = threads_[holder];
    std::lock_guard<std::mutex> lock(t.mu);
    return t.moved;
#else
    (void)holder;
    return false;
#endif
  }

  // Sleeps until the chain is finished (RunHeld wakes it).
  void SleepUntilFinished(Chain& chain) const {
    chain.sleepers.fetch_add(1, std::memory_order_seq_cst);
    for (int s = chain.state.load(std::memory_order_seq_cst); s != Finished();
         s = chain.state.load(std::memory_order_seq_cst))
      chain.state.wait(s, std::memory_order_seq_cst);
    chain.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }

  std::unique_ptr<Chain[]> chains_;
  std::unique_ptr<RunnerThread[]> threads_;
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
  ChainRun run(chains, links, runners, fn);
  pool->ParallelFor(runners, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) run.Run(r, runners);
  });
}

}  // namespace nee
