// Independent chains of sequential work, spread over a thread pool so that a
// thread that falls behind (its core busy with other work) holds up the others
// for no more than one short link.
//
// A chain is `links` links that must run in order: link m of a chain starts
// only after link m - 1 of it has returned, and sees everything it wrote. The
// chains are independent of each other. Typical chains: an RNN direction's
// time steps (a link: a few steps), a block of rows adding a forest's trees
// in order (a link: a range of trees). Which thread runs a link may change
// from run to run, the links themselves never do, so a kernel whose links
// compute the same way on any thread stays bitwise deterministic.
//
// Each thread runs its own share of the chains first (the same thread the
// same chains every run when the machine is quiet), then any chain nobody
// has started, link after link. A thread with nothing left that has done
// work itself then asks a thread still running a chain to hand it over, when
// that chain still has a quarter of its links to go, and polls briefly: the
// holder stops after its current link and leaves, the asker carries on. On a
// busy machine the thread that finished first is the one whose core was
// free, so the chain moves to the faster core (a BiLSTM direction on a core
// shared with another process no longer finishes at half speed); on a quiet
// one the chains end within a link of each other and stay where they are. A
// thread that handed a chain over does not ask for one back. (Polling stops
// early where it would not help, see parallel_chains.cc.) A holder that is
// not running at all (its CPU taken by another process for a time slice)
// cannot hand over: the asker then moves it onto its own CPU and sleeps
// until the chain is done. (A pool worker keeps off its caller's CPU: see
// thread_pool.h.)
#pragma once
#include <cstdint>
#include <functional>

namespace nee {

class ThreadPool;

// Calls fn(chain, link) once for every chain in [0, chains) and link in
// [0, links), on `pool`'s threads (on the caller alone when pool is null or
// there is one chain), link by link within a chain as described above.
void ParallelChains(ThreadPool* pool, int64_t chains, int64_t links,
                    const std::function<void(int64_t chain, int64_t link)>& fn);

}  // namespace nee
