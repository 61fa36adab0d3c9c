// Runs work in a forked child process confined by seccomp-bpf and resource
// limits (`nee run --sandbox`, docs/SECURITY.md). The child gets the bytes it
// needs through what it opened before confinement, and answers over a pipe;
// whatever it does, the parent gets a reply or an error naming what happened
// (a forbidden system call, a limit, a crash), never a crash of its own.
//
// Confinement comes in two stages, each a seccomp filter added to those in
// force (filters can only be added, never removed):
//   kLoading: no new processes (fork, vfork, clone without CLONE_THREAD), no
//     exec, no sockets, no opening a file for writing or creating one, no
//     executable memory, no signals to other processes, no raising limits;
//     files may be opened read-only (the model, its external data, inputs).
//     Threads may be started (clone with CLONE_THREAD).
//   kRunning: additionally no opening of files at all and no path lookups.
// A system call on no list stops the child (SIGSYS); the parent names it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace nee_cli {

struct SandboxLimits {
  int64_t address_space_bytes = 0;  // RLIMIT_AS of the child; 0: none (always none under ASan/TSan)
  int64_t cpu_seconds = 0;          // RLIMIT_CPU (all threads together); 0: none
  int64_t wall_ms = 0;              // the parent kills the child after this; 0: never
  int64_t max_reply_bytes = int64_t{1} << 34;  // a longer reply is refused
};

// A reply from the child (code 0, bytes) or an error (code: a
// nee_status_code_t, bytes: the message).
struct SandboxReply {
  int code = 0;
  std::string bytes;
};

enum class SandboxStage { kLoading, kRunning };

// Whether this build and kernel can confine a process; if not, *why says so.
bool SandboxSupported(std::string* why);

// Adds the filter of `stage` to the calling process (all its threads). False
// with *error set if it could not be installed.
bool EnterSandboxStage(SandboxStage stage, std::string* error);

// Forks. The child applies `limits`, enters kLoading and calls `work`, whose
// reply (or the exception it throws, as a runtime error) goes back to the
// parent; `work` calls EnterSandboxStage(kRunning) once it has opened what it
// needs. Call from a process with one thread (fork copies only the caller).
SandboxReply RunInSandbox(const SandboxLimits& limits, const std::function<SandboxReply()>& work);

// Test hook: 0 or the system call number that stopped the last child.
int LastForbiddenSyscall();

}  // namespace nee_cli
