// Runs work in a forked child process confined by seccomp-bpf and resource
// limits (`nee run --sandbox`, and sandboxed sessions of the library:
// api/sandboxed_session.h; docs/SECURITY.md). The child gets the bytes it
// needs through what it opened before confinement, and answers over a socket;
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
#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace nee {

struct SandboxLimits {
  int64_t address_space_bytes = 0;  // RLIMIT_AS of the child; 0: none (always none under ASan/TSan)
  int64_t cpu_seconds = 0;          // RLIMIT_CPU (all threads together, the child's whole life); 0: none
  int64_t wall_ms = 0;              // RunInSandbox: the parent kills the child after this; 0: never
  int64_t max_reply_bytes = int64_t{1} << 34;  // a longer reply is refused
};

// A reply from the child (code 0, bytes) or an error (code: a StatusCode,
// bytes: the message). Requests to a long-lived child have the same shape
// (code: what to do).
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

// The address-space limit nee gives a sandboxed process: the bytes its
// tensors may hold, the model file's, 1 GiB (code, heap) and 160 MiB per
// thread (stacks and allocator arenas).
int64_t SandboxAddressSpace(int64_t tensor_bytes, int64_t model_bytes, int64_t threads);

// The child's end of the socket: framed messages (type 'Q' requests from the
// parent, 'R' replies to it).
class SandboxChannel {
 public:
  explicit SandboxChannel(int fd) : fd_(fd) {}
  // The next request; false when the parent closed the socket or sent garbage.
  bool Receive(SandboxReply* request);
  bool Send(const SandboxReply& reply);

 private:
  int fd_;
};

// A forked child serving requests (`serve` runs in it, after the limits and
// the loading stage are in force, and the child exits when it returns). The
// child keeps only its end of the socket and stdin/stdout/stderr of the
// descriptors the parent had. Whatever the child does, Call/Receive return
// a reply or an error naming what happened (a forbidden system call, a limit,
// a crash, a timeout), never hang on a dead child nor raise a signal in the
// parent. Once the child has ended, every later call returns that error
// (prefixed "the sandboxed process ended earlier: "). Not thread-safe: callers
// serialize calls. The destructor kills and reaps the child.
class SandboxProcess {
 public:
  static std::unique_ptr<SandboxProcess> Start(const SandboxLimits& limits,
                                               const std::function<void(SandboxChannel&)>& serve,
                                               SandboxReply* error);
  ~SandboxProcess();
  SandboxProcess(const SandboxProcess&) = delete;
  SandboxProcess& operator=(const SandboxProcess&) = delete;

  // Sends a request and waits for the reply; wall_ms > 0: kills the child if
  // no reply came in that time. `what` names the work in error messages
  // ("running the model"). When `interrupt` becomes true while waiting, the
  // child gets one SIGUSR1 (its cue to stop the work and reply early).
  SandboxReply Call(const SandboxReply& request, int64_t wall_ms, const std::string& what,
                    const std::atomic<bool>* interrupt = nullptr);
  // Waits for the child's next reply without sending anything. `limit_ms`:
  // the limit a timeout's message names, when it is not wall_ms (Call waits
  // for what is left of its limit after sending, but names the whole limit).
  SandboxReply Receive(int64_t wall_ms, const std::string& what, const std::atomic<bool>* interrupt = nullptr,
                       int64_t limit_ms = 0);
  bool alive() const { return !ended_; }
  pid_t pid() const { return pid_; }
  // 0 or the system call number that stopped the child.
  int forbidden_syscall() const { return forbidden_; }

 private:
  SandboxProcess() = default;
  bool SendFrame(char type, const SandboxReply& message, int64_t deadline_ms);
  // Kills (if `kill_first`) and reaps the child and records why it ended.
  SandboxReply End(bool kill_first, int code, std::string message, const std::string& what);
  SandboxReply Ended() const;

  pid_t pid_ = -1;
  int fd_ = -1;
  void* shared_ = nullptr;
  SandboxLimits limits_;
  bool ended_ = false;
  SandboxReply end_;
  int forbidden_ = 0;
};

// Forks once: the child applies `limits`, enters kLoading and calls `work`,
// whose reply (or the exception it throws, as a runtime error) goes back to
// the parent; `work` calls EnterSandboxStage(kRunning) once it has opened what
// it needs. Call from a process with one thread (fork copies only the caller).
SandboxReply RunInSandbox(const SandboxLimits& limits, const std::function<SandboxReply()>& work);

// Test hook: 0 or the system call number that stopped the last child of RunInSandbox.
int LastForbiddenSyscall();

// What crosses the socket: u64 numbers and length-prefixed bytes.
class MessageWriter {
 public:
  void Raw(const void* p, size_t n) { bytes_.append(static_cast<const char*>(p), n); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  void Text(const std::string& s) {
    U64(s.size());
    bytes_ += s;
  }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

// Reads what a possibly compromised process sent: every length is checked; a
// read past the end leaves ok() false and returns zeros.
class MessageReader {
 public:
  explicit MessageReader(const std::string& bytes) : bytes_(bytes) {}
  bool Raw(void* out, size_t n);
  uint64_t U64() {
    uint64_t v = 0;
    Raw(&v, 8);
    return v;
  }
  int64_t I64() {
    int64_t v = 0;
    Raw(&v, 8);
    return v;
  }
  std::string Text();
  // A count that cannot exceed what is left (each item takes at least a byte).
  uint64_t Count() {
    uint64_t n = U64();
    if (n > bytes_.size() - pos_) ok_ = false;
    return ok_ ? n : 0;
  }
  bool ok() const { return ok_; }
  bool done() const { return ok_ && pos_ == bytes_.size(); }

 private:
  const std::string& bytes_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace nee
