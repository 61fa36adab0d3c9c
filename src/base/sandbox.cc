// See sandbox.h. Linux only; the filters need libseccomp (NEE_HAVE_SECCOMP).
#include "base/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#ifdef NEE_HAVE_SECCOMP
#include <seccomp.h>
#endif

#include "base/status.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NEE_SANDBOX_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NEE_SANDBOX_SANITIZED 1
#endif
#endif

namespace nee {
namespace {

constexpr int kRuntimeError = static_cast<int>(StatusCode::kRuntime);
constexpr int kOutOfMemory = static_cast<int>(StatusCode::kOutOfMemory);
constexpr int kNotImplemented = static_cast<int>(StatusCode::kNotImplemented);
constexpr int kCancelled = static_cast<int>(StatusCode::kCancelled);

// Exit status of a child stopped by its SIGSYS handler (128 + SIGSYS, as a
// shell would show the signal).
constexpr int kForbiddenExit = 128 + SIGSYS;

// A page shared between parent and child: the child's SIGSYS handler leaves
// the offending system call's number there.
struct SharedPage {
  std::atomic<int> forbidden_syscall;
};
SharedPage* g_shared = nullptr;
int g_last_forbidden = 0;

void OnForbiddenSyscall(int, siginfo_t* info, void*) {
  if (g_shared) g_shared->forbidden_syscall.store(info->si_syscall, std::memory_order_relaxed);
  _exit(kForbiddenExit);
}

bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::string SyscallName(int nr) {
#ifdef NEE_HAVE_SECCOMP
  if (char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr)) {
    std::string s = name;
    free(name);
    return s;
  }
#endif
  return "#" + std::to_string(nr);
}

#ifdef NEE_HAVE_SECCOMP
// Adds rules, remembering the first failure.
class FilterBuilder {
 public:
  explicit FilterBuilder(uint32_t default_action) : ctx_(seccomp_init(default_action)) {
    if (!ctx_) error_ = "seccomp_init failed";
  }
  ~FilterBuilder() {
    if (ctx_) seccomp_release(ctx_);
  }
  template <typename... Cmp>
  void Rule(uint32_t action, int nr, Cmp... cmp) {
    if (!ctx_ || !error_.empty() || nr < 0) return;  // (nr < 0: not on this architecture)
    const scmp_arg_cmp args[] = {cmp..., scmp_arg_cmp{0, SCMP_CMP_EQ, 0, 0}};  // (the last entry only avoids an empty array)
    int rc = seccomp_rule_add_array(ctx_, action, nr, sizeof...(Cmp), args);
    if (rc < 0) error_ = "seccomp rule for " + SyscallName(nr) + ": " + std::strerror(-rc);
  }
  bool Load(std::string* error) {
    if (ctx_ && error_.empty()) {
      // Every thread of the process, including pool workers already started.
      int rc = seccomp_attr_set(ctx_, SCMP_FLTATR_CTL_TSYNC, 1);
      if (rc == 0) rc = seccomp_load(ctx_);
      if (rc < 0) error_ = std::string("loading the seccomp filter: ") + std::strerror(-rc);
    }
    if (!error_.empty() && error) *error = error_;
    return error_.empty();
  }

 private:
  scmp_filter_ctx ctx_;
  std::string error_;
};

constexpr uint32_t kDeny = SCMP_ACT_ERRNO(EPERM);

// Open flags that write or create.
const uint64_t kWriteOpenFlags[] = {O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND, 020000000 /* __O_TMPFILE */};

bool InstallLoadingFilter(std::string* error) {
  // Anything not listed stops the child through the SIGSYS handler.
  FilterBuilder f(SCMP_ACT_TRAP);
  const uint32_t allow = SCMP_ACT_ALLOW;
  for (int nr : {SCMP_SYS(read), SCMP_SYS(readv), SCMP_SYS(pread64), SCMP_SYS(preadv), SCMP_SYS(write),
                 SCMP_SYS(writev), SCMP_SYS(close), SCMP_SYS(fstat), SCMP_SYS(lseek), SCMP_SYS(fcntl),
                 SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(madvise), SCMP_SYS(brk), SCMP_SYS(futex),
                 SCMP_SYS(set_robust_list), SCMP_SYS(get_robust_list), SCMP_SYS(rseq), SCMP_SYS(set_tid_address),
                 SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity), SCMP_SYS(sched_setaffinity), SCMP_SYS(getcpu),
                 SCMP_SYS(membarrier), SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep), SCMP_SYS(clock_gettime),
                 SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday), SCMP_SYS(time), SCMP_SYS(getpid), SCMP_SYS(gettid),
                 SCMP_SYS(getppid), SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid), SCMP_SYS(getegid),
                 SCMP_SYS(getrandom), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigreturn),
                 SCMP_SYS(sigaltstack), SCMP_SYS(exit), SCMP_SYS(exit_group), SCMP_SYS(sysinfo),
                 SCMP_SYS(getrlimit), SCMP_SYS(getrusage), SCMP_SYS(uname), SCMP_SYS(restart_syscall),
                 // Path lookups for reading: the model's folder, external data, inputs.
                 SCMP_SYS(newfstatat), SCMP_SYS(statx), SCMP_SYS(stat), SCMP_SYS(lstat), SCMP_SYS(readlink),
                 SCMP_SYS(readlinkat), SCMP_SYS(getcwd), SCMP_SYS(access), SCMP_SYS(faccessat),
                 SCMP_SYS(faccessat2)})
    f.Rule(allow, nr);
  // Threads, not processes. glibc tries clone3 first, whose flags live in
  // memory a filter cannot read: ENOSYS sends it back to clone.
  f.Rule(allow, SCMP_SYS(clone), SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
  f.Rule(kDeny, SCMP_SYS(clone), SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
  f.Rule(SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3));
  // Memory, never executable.
  for (int nr : {SCMP_SYS(mmap), SCMP_SYS(mprotect)}) {
    f.Rule(allow, nr, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    f.Rule(kDeny, nr, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC));
  }
  // Files: read-only.
  uint64_t write_flags = 0;
  for (uint64_t flag : kWriteOpenFlags) {
    write_flags |= flag;
    f.Rule(kDeny, SCMP_SYS(openat), SCMP_A2(SCMP_CMP_MASKED_EQ, flag, flag));
  }
  f.Rule(allow, SCMP_SYS(openat), SCMP_A2(SCMP_CMP_MASKED_EQ, write_flags, 0));
  // Signals to this process only (abort, raise); reading limits, not raising them.
  const pid_t self = getpid();
  f.Rule(allow, SCMP_SYS(tgkill), SCMP_A0(SCMP_CMP_EQ, static_cast<uint64_t>(self), 0));
  f.Rule(kDeny, SCMP_SYS(tgkill), SCMP_A0(SCMP_CMP_NE, static_cast<uint64_t>(self), 0));
  f.Rule(allow, SCMP_SYS(prlimit64), SCMP_A2(SCMP_CMP_EQ, 0, 0));
  f.Rule(kDeny, SCMP_SYS(prlimit64), SCMP_A2(SCMP_CMP_NE, 0, 0));
  // isatty (stdio); other device controls fail.
  f.Rule(allow, SCMP_SYS(ioctl), SCMP_A1(SCMP_CMP_EQ, TCGETS, 0));
  f.Rule(kDeny, SCMP_SYS(ioctl), SCMP_A1(SCMP_CMP_NE, TCGETS, 0));
  // Thread names, and adding filters (the next stage; filters only restrict).
  for (int option : {PR_SET_NAME, PR_GET_NAME, PR_SET_NO_NEW_PRIVS, PR_GET_SECCOMP, PR_SET_SECCOMP})
    f.Rule(allow, SCMP_SYS(prctl), SCMP_A0(SCMP_CMP_EQ, static_cast<uint64_t>(option), 0));
  f.Rule(allow, SCMP_SYS(seccomp));
  // What a compromised child would try first fails with EPERM (rather than
  // stopping it), so that nee's own error paths report it.
  for (int nr : {SCMP_SYS(open), SCMP_SYS(creat), SCMP_SYS(openat2), SCMP_SYS(socket), SCMP_SYS(socketpair),
                 SCMP_SYS(connect), SCMP_SYS(bind), SCMP_SYS(listen), SCMP_SYS(accept), SCMP_SYS(accept4),
                 SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(fork), SCMP_SYS(vfork), SCMP_SYS(ptrace),
                 SCMP_SYS(kill), SCMP_SYS(tkill), SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev),
                 SCMP_SYS(unlink), SCMP_SYS(unlinkat), SCMP_SYS(rename), SCMP_SYS(renameat), SCMP_SYS(renameat2),
                 SCMP_SYS(mkdir), SCMP_SYS(mkdirat), SCMP_SYS(rmdir), SCMP_SYS(symlink), SCMP_SYS(symlinkat),
                 SCMP_SYS(link), SCMP_SYS(linkat), SCMP_SYS(chmod), SCMP_SYS(fchmod), SCMP_SYS(fchmodat),
                 SCMP_SYS(chown), SCMP_SYS(fchown), SCMP_SYS(fchownat), SCMP_SYS(truncate), SCMP_SYS(ftruncate),
                 SCMP_SYS(memfd_create), SCMP_SYS(setrlimit), SCMP_SYS(mount), SCMP_SYS(dup), SCMP_SYS(dup2),
                 SCMP_SYS(dup3)})
    f.Rule(kDeny, nr);
#ifdef NEE_SANDBOX_SANITIZED
  // The sanitizers' runtimes check whether memory is readable by writing it
  // to a pipe (UBSan's vptr check, ASan's reports).
  for (int nr : {SCMP_SYS(pipe), SCMP_SYS(pipe2)}) f.Rule(allow, nr);
#else
  for (int nr : {SCMP_SYS(pipe), SCMP_SYS(pipe2)}) f.Rule(kDeny, nr);
#endif
  return f.Load(error);
}

bool InstallRunningFilter(std::string* error) {
  // Added to the loading filter (the stricter answer of the two wins).
  FilterBuilder f(SCMP_ACT_ALLOW);
  for (int nr : {SCMP_SYS(openat), SCMP_SYS(statx), SCMP_SYS(stat), SCMP_SYS(lstat), SCMP_SYS(readlink),
                 SCMP_SYS(readlinkat), SCMP_SYS(access), SCMP_SYS(faccessat), SCMP_SYS(faccessat2),
                 SCMP_SYS(sched_setaffinity)})
    f.Rule(kDeny, nr);
  // fstat is newfstatat(fd, "", AT_EMPTY_PATH) in glibc; a path is refused.
  f.Rule(kDeny, SCMP_SYS(newfstatat), SCMP_A3(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, 0));
  return f.Load(error);
}
#endif  // NEE_HAVE_SECCOMP

bool ApplyLimits(const SandboxLimits& limits, std::string* error) {
  auto set = [&](int resource, rlim_t soft, rlim_t hard, const char* what) {
    rlimit r{soft, hard};
    if (setrlimit(resource, &r) != 0) {
      *error = std::string("setting the sandbox's ") + what + " limit: " + std::strerror(errno);
      return false;
    }
    return true;
  };
  // A crash must not write a core file.
  if (!set(RLIMIT_CORE, 0, 0, "core file")) return false;
#ifndef NEE_SANDBOX_SANITIZED  // (the sanitizers reserve terabytes of address space)
  if (limits.address_space_bytes > 0) {
    rlim_t bytes = static_cast<rlim_t>(limits.address_space_bytes);
    if (!set(RLIMIT_AS, bytes, bytes, "address space")) return false;
  }
#endif
  if (limits.cpu_seconds > 0) {
    // SIGXCPU at the soft limit, SIGKILL a second later.
    rlim_t seconds = static_cast<rlim_t>(limits.cpu_seconds);
    if (!set(RLIMIT_CPU, seconds, seconds + 1, "CPU time")) return false;
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// A frame: type ('Q' request, 'R' reply), int32 code, uint64 length, bytes.
constexpr size_t kHeader = 13;
void PutHeader(char* header, char type, const SandboxReply& m) {
  header[0] = type;
  int32_t code = m.code;
  uint64_t length = m.bytes.size();
  std::memcpy(header + 1, &code, 4);
  std::memcpy(header + 5, &length, 8);
}

// Closes every descriptor the parent had but stdio and `keep` (another
// session's socket, a caller's files): the child reaches only what it opens.
void CloseInheritedDescriptors(int keep) {
#ifdef SYS_close_range
  if (keep > 3 && syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u) != 0) {
    for (int fd = 3; fd < keep; ++fd) close(fd);
  }
  if (syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u) == 0) return;
#endif
  const long max = sysconf(_SC_OPEN_MAX);
  for (long fd = 3; fd < (max > 0 && max < (1 << 20) ? max : 65536); ++fd)
    if (fd != keep) close(static_cast<int>(fd));
}

// Runs fn in the child, turning what it throws into an error reply.
SandboxReply Guarded(const SandboxLimits& limits, const std::function<SandboxReply()>& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return {kOutOfMemory, "out of memory in the sandboxed process (address-space limit " +
                              std::to_string(limits.address_space_bytes) + " bytes)"};
  } catch (const std::exception& e) {
    return {kRuntimeError, e.what()};
  } catch (...) {
    return {kRuntimeError, "unknown exception in the sandboxed process"};
  }
}

[[noreturn]] void ChildMain(int fd, pid_t parent, const SandboxLimits& limits,
                            const std::function<void(SandboxChannel&)>& serve) {
  // Die with the parent.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  CloseInheritedDescriptors(fd);
  SandboxChannel channel(fd);
  std::string error;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_sigaction = OnForbiddenSyscall;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGSYS, &action, nullptr) != 0) {
    channel.Send({kRuntimeError, std::string("sandbox: sigaction: ") + std::strerror(errno)});
  } else if (!ApplyLimits(limits, &error) || !EnterSandboxStage(SandboxStage::kLoading, &error)) {
    channel.Send({kRuntimeError, "sandbox: " + error});
  } else {
    try {
      serve(channel);
    } catch (...) {
      channel.Send(Guarded(limits, [] () -> SandboxReply { throw; }));
    }
  }
  // Not exit(): no atexit handlers or destructors in a process that may be
  // compromised, and the parent's unflushed stdio stays unwritten.
  _exit(0);
}

std::string Seconds(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", static_cast<double>(ms) / 1000.0);
  return buf;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Forks are serialized, so that no child inherits another child's socket end
// in the moment before its parent closes it.
std::mutex g_fork_mu;

}  // namespace

bool SandboxSupported(std::string* why) {
#ifndef NEE_HAVE_SECCOMP
  if (why) *why = "this nee was built without libseccomp (Debian: apt-get install libseccomp-dev, then rebuild)";
  return false;
#else
  if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
    if (why) *why = "the kernel does not support seccomp filters";
    return false;
  }
  return true;
#endif
}

bool EnterSandboxStage(SandboxStage stage, std::string* error) {
#ifndef NEE_HAVE_SECCOMP
  (void)stage;
  SandboxSupported(error);
  return false;
#else
  return stage == SandboxStage::kLoading ? InstallLoadingFilter(error) : InstallRunningFilter(error);
#endif
}

int64_t SandboxAddressSpace(int64_t tensor_bytes, int64_t model_bytes, int64_t threads) {
  return tensor_bytes + model_bytes + (int64_t{1} << 30) + threads * (int64_t{160} << 20);
}

bool SandboxChannel::Receive(SandboxReply* request) {
  char header[kHeader];
  if (!ReadAll(fd_, header, sizeof header) || header[0] != 'Q') return false;
  int32_t code = 0;
  uint64_t length = 0;
  std::memcpy(&code, header + 1, 4);
  std::memcpy(&length, header + 5, 8);
  if (length > (uint64_t{1} << 40)) return false;
  request->code = code;
  request->bytes.resize(static_cast<size_t>(length));
  return ReadAll(fd_, request->bytes.data(), request->bytes.size());
}

bool SandboxChannel::Send(const SandboxReply& reply) {
  char header[kHeader];
  PutHeader(header, 'R', reply);
  return WriteAll(fd_, header, sizeof header) && WriteAll(fd_, reply.bytes.data(), reply.bytes.size());
}

bool MessageReader::Raw(void* out, size_t n) {
  if (!ok_ || n > bytes_.size() - pos_) {
    ok_ = false;
    std::memset(out, 0, n);
    return false;
  }
  std::memcpy(out, bytes_.data() + pos_, n);
  pos_ += n;
  return true;
}

std::string MessageReader::Text() {
  uint64_t n = U64();
  if (!ok_ || n > bytes_.size() - pos_) {
    ok_ = false;
    return {};
  }
  std::string s = bytes_.substr(pos_, n);
  pos_ += n;
  return s;
}

std::unique_ptr<SandboxProcess> SandboxProcess::Start(const SandboxLimits& limits,
                                                      const std::function<void(SandboxChannel&)>& serve,
                                                      SandboxReply* error) {
  std::string why;
  if (!SandboxSupported(&why)) {
    *error = {kNotImplemented, "sandboxing is not available: " + why};
    return nullptr;
  }
  std::unique_ptr<SandboxProcess> p(new SandboxProcess());
  p->limits_ = limits;
  void* page = mmap(nullptr, sizeof(SharedPage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    *error = {kRuntimeError, std::string("sandbox: mmap: ") + std::strerror(errno)};
    return nullptr;
  }
  p->shared_ = page;
  SharedPage* shared = new (page) SharedPage{};
  std::lock_guard<std::mutex> lock(g_fork_mu);
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    *error = {kRuntimeError, std::string("sandbox: socketpair: ") + std::strerror(errno)};
    return nullptr;
  }
  std::fflush(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    *error = {kRuntimeError, std::string("sandbox: fork: ") + std::strerror(errno)};
    return nullptr;
  }
  if (pid == 0) {
    close(fds[0]);
    g_shared = shared;
    ChildMain(fds[1], parent, limits, serve);
  }
  close(fds[1]);
  p->pid_ = pid;
  p->fd_ = fds[0];
  // Never block on a child that stopped reading or writing: every wait is a poll with a deadline.
  fcntl(p->fd_, F_SETFL, fcntl(p->fd_, F_GETFL) | O_NONBLOCK);
  return p;
}

SandboxProcess::~SandboxProcess() {
  if (pid_ > 0 && !ended_) {
    kill(pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (fd_ >= 0) close(fd_);
  if (shared_) munmap(shared_, sizeof(SharedPage));
}

SandboxReply SandboxProcess::Ended() const {
  return {end_.code, "the sandboxed process ended earlier: " + end_.bytes};
}

bool SandboxProcess::SendFrame(char type, const SandboxReply& message, int64_t deadline_ms) {
  char header[kHeader];
  PutHeader(header, type, message);
  const char* parts[2] = {header, message.bytes.data()};
  size_t sizes[2] = {sizeof header, message.bytes.size()};
  for (int part = 0; part < 2; ++part) {
    const char* p = parts[part];
    size_t left = sizes[part];
    while (left > 0) {
      // MSG_NOSIGNAL: a dead child is EPIPE here, not SIGPIPE for the caller's process.
      ssize_t n = send(fd_, p, left, MSG_NOSIGNAL);
      if (n > 0) {
        p += n;
        left -= static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        int wait_ms = -1;
        if (deadline_ms > 0) {
          int64_t left_ms = deadline_ms - NowMs();
          if (left_ms <= 0) return false;
          wait_ms = static_cast<int>(std::min<int64_t>(left_ms, 1 << 30));
        }
        pollfd pf{fd_, POLLOUT, 0};
        poll(&pf, 1, wait_ms);
        continue;
      }
      return false;
    }
  }
  return true;
}

SandboxReply SandboxProcess::End(bool kill_first, int code, std::string message, const std::string& what) {
  int status = 0;
  rusage usage{};
  bool reaped = false;
  if (!kill_first) {
    // The child closed its end: it is exiting. Give it a moment, then make sure.
    for (int i = 0; i < 200 && !reaped; ++i) {
      pid_t r = wait4(pid_, &status, WNOHANG, &usage);
      if (r == pid_) reaped = true;
      else if (r < 0 && errno != EINTR) break;
      else usleep(5000);
    }
  }
  if (!reaped) {
    kill(pid_, SIGKILL);
    while (wait4(pid_, &status, 0, &usage) < 0 && errno == EINTR) {
    }
  }
  ended_ = true;
  forbidden_ = static_cast<SharedPage*>(shared_)->forbidden_syscall.load(std::memory_order_relaxed);
  if (message.empty()) {
    const bool signaled = WIFSIGNALED(status);
    const int signal = signaled ? WTERMSIG(status) : 0;
    const double cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
    code = kRuntimeError;
    if (forbidden_ != 0 || signal == SIGSYS || (WIFEXITED(status) && WEXITSTATUS(status) == kForbiddenExit)) {
      message = "the sandboxed process attempted a forbidden system call (" +
                (forbidden_ ? SyscallName(forbidden_) : std::string("unknown")) +
                ") and was stopped; nothing it did reached this process";
    } else if (signal == SIGXCPU || (signal == SIGKILL && limits_.cpu_seconds > 0 && cpu_s >= limits_.cpu_seconds)) {
      code = kCancelled;
      message = "the sandboxed process used its CPU time limit of " + std::to_string(limits_.cpu_seconds) +
                " s and was stopped";
    } else if (signaled) {
      message = "the sandboxed process was killed by signal " + std::to_string(signal) + " (" + strsignal(signal) +
                ") while " + what;
    } else {
      message = "the sandboxed process exited with status " +
                std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                " without a complete reply (it failed while " + what + "; see its messages above)";
    }
  }
  end_ = {code, message};
  return end_;
}

SandboxReply SandboxProcess::Receive(int64_t wall_ms, const std::string& what, const std::atomic<bool>* interrupt,
                                     int64_t limit_ms) {
  if (ended_) return Ended();
  bool interrupted = false;
  const int64_t deadline = wall_ms > 0 ? NowMs() + wall_ms : 0;
  std::string received;
  size_t want = kHeader;
  std::vector<char> buffer(1 << 16);
  for (;;) {
    if (received.size() == want) {
      if (want == kHeader) {
        uint64_t length = 0;
        std::memcpy(&length, received.data() + 5, 8);
        if (received[0] != 'R')
          return End(true, kRuntimeError, "the sandboxed process sent a malformed reply and was stopped", what);
        if (length > static_cast<uint64_t>(limits_.max_reply_bytes))
          return End(true, kRuntimeError,
                     "the sandboxed process sent a reply longer than " + std::to_string(limits_.max_reply_bytes) +
                         " bytes and was stopped",
                     what);
        want = kHeader + static_cast<size_t>(length);  // (no reserve: the length is the child's word)
        if (want > kHeader) continue;
      }
      int32_t code = 0;
      std::memcpy(&code, received.data() + 1, 4);
      if (code < 0 || code > kCancelled) code = kRuntimeError;
      return {code, received.substr(kHeader)};
    }
    const size_t chunk = std::min(buffer.size(), want - received.size());
    ssize_t n = read(fd_, buffer.data(), chunk);
    if (n > 0) {
      received.append(buffer.data(), static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return End(false, 0, "", what);  // the child closed its end: it ended
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return End(false, 0, "", what);
    if (interrupt && !interrupted && interrupt->load(std::memory_order_relaxed)) {
      kill(pid_, SIGUSR1);
      interrupted = true;
    }
    // While an interrupt may still come, look at it every 10 ms.
    int wait_ms = interrupt && !interrupted ? 10 : -1;
    if (deadline > 0) {
      int64_t left = deadline - NowMs();
      if (left <= 0)
        return End(true, kCancelled,
                   "the sandboxed process took longer than " + Seconds(limit_ms > 0 ? limit_ms : wall_ms) + " (" +
                       what + ") and was stopped",
                   what);
      wait_ms = static_cast<int>(std::min<int64_t>(left, wait_ms < 0 ? (1 << 30) : wait_ms));
    }
    pollfd pf{fd_, POLLIN, 0};
    poll(&pf, 1, wait_ms);
  }
}

SandboxReply SandboxProcess::Call(const SandboxReply& request, int64_t wall_ms, const std::string& what,
                                  const std::atomic<bool>* interrupt) {
  if (ended_) return Ended();
  const int64_t start = NowMs();
  if (!SendFrame('Q', request, wall_ms > 0 ? start + wall_ms : 0)) {
    if (wall_ms > 0 && NowMs() - start >= wall_ms)
      return End(true, kCancelled,
                 "the sandboxed process took longer than " + Seconds(wall_ms) + " (" + what + ") and was stopped",
                 what);
    return End(false, 0, "", what);
  }
  int64_t left = 0;
  if (wall_ms > 0) left = std::max<int64_t>(1, wall_ms - (NowMs() - start));
  SandboxReply r = Receive(left, what, interrupt, wall_ms);
  return r;
}

int LastForbiddenSyscall() { return g_last_forbidden; }

SandboxReply RunInSandbox(const SandboxLimits& limits, const std::function<SandboxReply()>& work) {
  g_last_forbidden = 0;
  SandboxReply error;
  std::unique_ptr<SandboxProcess> p = SandboxProcess::Start(
      limits, [&](SandboxChannel& channel) { channel.Send(Guarded(limits, work)); }, &error);
  if (!p) {
    if (error.code == kNotImplemented) error.bytes = "--sandbox is not available: " + error.bytes.substr(error.bytes.find(": ") + 2);
    return error;
  }
  SandboxReply r = p->Receive(limits.wall_ms, "loading and running the model");
  if (!p->alive()) g_last_forbidden = p->forbidden_syscall();
  return r;
}

}  // namespace nee
