// The confinement of `nee run --sandbox` and sandboxed sessions
// (base/sandbox.h): what a child running compromised code can still do, and
// what the parent reports. Each test forks a child (RunInSandbox, or a
// long-lived SandboxProcess), so the filters never touch the test process.
#include "base/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "nee/nee.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

namespace nee {
namespace {

SandboxReply Ok(std::string text) { return {NEE_STATUS_OK, std::move(text)}; }

// "EPERM" or the result, for a system call that returned `rc`.
std::string Outcome(long rc) {
  if (rc >= 0) return "succeeded";
  return errno == EPERM ? "EPERM" : std::string("failed: ") + std::strerror(errno);
}

SandboxReply Confined(const std::function<SandboxReply()>& work, SandboxLimits limits = {}) {
  return RunInSandbox(limits, work);
}

SandboxReply RunStage2(const std::function<std::string()>& work) {
  return Confined([&] {
    std::string error;
    if (!EnterSandboxStage(SandboxStage::kRunning, &error)) return SandboxReply{NEE_STATUS_RUNTIME_ERROR, error};
    return Ok(work());
  });
}

class Sandbox : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!SandboxSupported(&why)) GTEST_SKIP() << why;
    // A file the children may try to read.
    char name[] = "/tmp/nee_sandbox_test_XXXXXX";
    int fd = mkstemp(name);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "secret", 6), 6);
    close(fd);
    file_ = name;
  }
  void TearDown() override {
    if (!file_.empty()) unlink(file_.c_str());
  }
  std::string file_;
};

TEST_F(Sandbox, ReplyAndErrorReachTheParent) {
  SandboxReply r = Confined([] { return Ok(std::string("hello\0world", 11)); });
  EXPECT_EQ(r.code, NEE_STATUS_OK);
  EXPECT_EQ(r.bytes, std::string("hello\0world", 11));
  r = Confined([] { return SandboxReply{NEE_STATUS_INVALID_MODEL, "node 'x' (Foo): bad"}; });
  EXPECT_EQ(r.code, NEE_STATUS_INVALID_MODEL);
  EXPECT_EQ(r.bytes, "node 'x' (Foo): bad");
  r = Confined([]() -> SandboxReply { throw std::runtime_error("thrown in the child"); });
  EXPECT_EQ(r.code, NEE_STATUS_RUNTIME_ERROR);
  EXPECT_EQ(r.bytes, "thrown in the child");
}

TEST_F(Sandbox, LoadingStageReadsFilesButNeverWritesOrCreates) {
  SandboxReply r = Confined([&] {
    int fd = open(file_.c_str(), O_RDONLY | O_CLOEXEC);
    char buf[8] = {};
    std::string read_back = fd >= 0 && read(fd, buf, 6) == 6 ? buf : "unreadable";
    if (fd >= 0) close(fd);
    std::string out = read_back;
    out += " write:" + Outcome(open(file_.c_str(), O_WRONLY));
    out += " rdwr:" + Outcome(open(file_.c_str(), O_RDWR));
    out += " append:" + Outcome(open(file_.c_str(), O_RDONLY | O_APPEND));
    out += " trunc:" + Outcome(open(file_.c_str(), O_RDONLY | O_TRUNC));
    out += " create:" + Outcome(open((file_ + ".new").c_str(), O_RDONLY | O_CREAT, 0600));
    out += " unlink:" + Outcome(unlink(file_.c_str()));
    return Ok(out);
  });
  ASSERT_EQ(r.code, NEE_STATUS_OK) << r.bytes;
  EXPECT_EQ(r.bytes, "secret write:EPERM rdwr:EPERM append:EPERM trunc:EPERM create:EPERM unlink:EPERM");
  EXPECT_NE(access((file_ + ".new").c_str(), F_OK), 0);
  char buf[8] = {};
  FILE* f = std::fopen(file_.c_str(), "rb");
  ASSERT_TRUE(f);
  EXPECT_EQ(std::fread(buf, 1, 7, f), 6u);
  std::fclose(f);
  EXPECT_STREQ(buf, "secret");
}

TEST_F(Sandbox, RunningStageOpensNothing) {
  SandboxReply r = RunStage2([&] {
    std::string out = "open:" + Outcome(open(file_.c_str(), O_RDONLY));
    out += " openat:" + Outcome(openat(AT_FDCWD, "/", O_RDONLY | O_DIRECTORY));
    struct stat st;
    out += " stat:" + Outcome(stat(file_.c_str(), &st));
    out += " fstat:" + Outcome(fstat(1, &st));
    return out;
  });
  ASSERT_EQ(r.code, NEE_STATUS_OK) << r.bytes;
  EXPECT_EQ(r.bytes, "open:EPERM openat:EPERM stat:EPERM fstat:succeeded");
}

TEST_F(Sandbox, NoSocketsProcessesExecOrExecutableMemory) {
  SandboxReply r = RunStage2([] {
    std::string out = "socket:" + Outcome(socket(AF_INET, SOCK_STREAM, 0));
    out += " unix:" + Outcome(socket(AF_UNIX, SOCK_STREAM, 0));
    int pair[2];
    out += " socketpair:" + Outcome(socketpair(AF_UNIX, SOCK_STREAM, 0, pair));
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    out += " execve:" + Outcome(execve("/bin/true", argv, environ));
    pid_t pid = fork();
    if (pid == 0) _exit(0);  // (only if fork wrongly succeeded)
    out += " fork:" + Outcome(pid);
    out += " vfork:" + Outcome(syscall(SYS_vfork));
    out += " kill:" + Outcome(kill(getppid(), 0));
    void* code = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    out += " mmap-exec:" + Outcome(code == MAP_FAILED ? -1 : 0);
    void* data = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    out += " mprotect-exec:" + Outcome(data == MAP_FAILED ? 0 : mprotect(data, 4096, PROT_READ | PROT_EXEC));
    // Threads are allowed: the intra-op pool starts them.
    int seen = 0;
    std::thread t([&] { seen = 42; });
    t.join();
    out += " thread:" + std::to_string(seen);
    return out;
  });
  ASSERT_EQ(r.code, NEE_STATUS_OK) << r.bytes;
  EXPECT_EQ(r.bytes,
            "socket:EPERM unix:EPERM socketpair:EPERM execve:EPERM fork:EPERM vfork:EPERM kill:EPERM "
            "mmap-exec:EPERM mprotect-exec:EPERM thread:42");
}

TEST_F(Sandbox, UnlistedSystemCallStopsTheChildAndIsNamed) {
  SandboxReply r = Confined([] {
    syscall(SYS_chdir, "/");
    return Ok("chdir returned");
  });
  EXPECT_EQ(r.code, NEE_STATUS_RUNTIME_ERROR);
  EXPECT_NE(r.bytes.find("forbidden system call (chdir)"), std::string::npos) << r.bytes;
  EXPECT_EQ(LastForbiddenSyscall(), SYS_chdir);
}

TEST_F(Sandbox, CrashIsReportedNotPropagated) {
  SandboxReply r = Confined([]() -> SandboxReply {
    raise(SIGSEGV);
    return Ok("survived");
  });
  EXPECT_EQ(r.code, NEE_STATUS_RUNTIME_ERROR);
#ifdef SANITIZED  // (ASan reports the SEGV itself and exits with status 1)
  EXPECT_NE(r.bytes.find("exited with status 1 without a complete reply"), std::string::npos) << r.bytes;
#else
  EXPECT_NE(r.bytes.find("killed by signal 11"), std::string::npos) << r.bytes;
#endif
}

TEST_F(Sandbox, GiganticAllocationFailsInTheChild) {
#ifdef SANITIZED
  GTEST_SKIP() << "the sanitizers' runtimes need an unlimited address space";
#else
  SandboxLimits limits;
  limits.address_space_bytes = int64_t{1} << 30;
  SandboxReply r = Confined(
      [] {
        void* p = std::malloc(size_t{4} << 30);  // within physical memory, beyond the limit
        std::string out = p ? "allocated" : "malloc:null";
        std::free(p);
        char* q = new char[size_t{4} << 30];  // bad_alloc, reported by the sandbox
        q[0] = 1;
        delete[] q;
        return Ok(out);
      },
      limits);
  EXPECT_EQ(r.code, NEE_STATUS_OUT_OF_MEMORY) << r.bytes;
  EXPECT_NE(r.bytes.find("address-space limit 1073741824 bytes"), std::string::npos) << r.bytes;
#endif
}

TEST_F(Sandbox, WallClockAndCpuLimitsStopTheChild) {
  SandboxLimits wall;
  wall.wall_ms = 300;
  SandboxReply r = Confined(
      [] {
        sleep(20);
        return Ok("woke");
      },
      wall);
  EXPECT_EQ(r.code, NEE_STATUS_CANCELLED);
  EXPECT_NE(r.bytes.find("took longer than 0.3 s"), std::string::npos) << r.bytes;

  SandboxLimits cpu;
  cpu.cpu_seconds = 1;
  r = Confined(
      [] {
        volatile uint64_t x = 0;
        for (;;) x = x + 1;
        return Ok("done");
      },
      cpu);
  EXPECT_EQ(r.code, NEE_STATUS_CANCELLED);
  EXPECT_NE(r.bytes.find("CPU time limit of 1 s"), std::string::npos) << r.bytes;
}

TEST_F(Sandbox, OversizedReplyIsRefused) {
  SandboxLimits limits;
  limits.max_reply_bytes = 1000;
  SandboxReply r = Confined([] { return Ok(std::string(5000, 'x')); }, limits);
  EXPECT_EQ(r.code, NEE_STATUS_RUNTIME_ERROR);
  EXPECT_NE(r.bytes.find("longer than 1000 bytes"), std::string::npos) << r.bytes;
}

// ---- Long-lived children (SandboxProcess, as sandboxed sessions use) ----

// A server that answers "echo:<request>", and per request code: 2 exits
// without answering, 3 never answers, 6 waits for SIGUSR1 and answers
// "interrupted". (An oversized reply: OversizedReplyIsRefused above, the same
// reading code.)
volatile sig_atomic_t g_interrupted = 0;
void Serve(SandboxChannel& channel) {
  std::string error;
  if (!EnterSandboxStage(SandboxStage::kRunning, &error)) return;
  SandboxReply request;
  while (channel.Receive(&request)) {
    if (request.code == 2) _exit(1);
    if (request.code == 3) {
      for (;;) usleep(1000);  // (pause is not on the allow-list)
    }
    if (request.code == 6) {
      struct sigaction action;
      std::memset(&action, 0, sizeof action);
      action.sa_handler = [](int) { g_interrupted = 1; };
      sigemptyset(&action.sa_mask);
      sigaction(SIGUSR1, &action, nullptr);
      while (!g_interrupted) usleep(1000);
      channel.Send({NEE_STATUS_CANCELLED, "interrupted"});
      continue;
    }
    channel.Send({NEE_STATUS_OK, "echo:" + request.bytes});
  }
}

TEST_F(Sandbox, LongLivedChildServesRequestsInOrderAndIsReapedOnDestruction) {
  SandboxReply error;
  auto p = SandboxProcess::Start({}, Serve, &error);
  ASSERT_NE(p, nullptr) << error.bytes;
  const pid_t pid = p->pid();
  for (int i = 0; i < 20; ++i) {
    SandboxReply r = p->Call({1, std::to_string(i)}, 5000, "echoing");
    ASSERT_EQ(r.code, NEE_STATUS_OK) << r.bytes;
    EXPECT_EQ(r.bytes, "echo:" + std::to_string(i));
  }
  // A request larger than the socket's buffers crosses whole.
  SandboxReply big = p->Call({1, std::string(8 << 20, 'b')}, 20000, "echoing");
  ASSERT_EQ(big.code, NEE_STATUS_OK);
  EXPECT_EQ(big.bytes.size(), (8u << 20) + 5);
  p.reset();
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);  // reaped
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(Sandbox, LongLivedChildThatExitsIsAnErrorThenAndLater) {
  SandboxReply error;
  auto p = SandboxProcess::Start({}, Serve, &error);
  ASSERT_NE(p, nullptr);
  SandboxReply r = p->Call({2, ""}, 5000, "running the model");
  EXPECT_EQ(r.code, NEE_STATUS_RUNTIME_ERROR);
  EXPECT_NE(r.bytes.find("exited with status 1 without a complete reply (it failed while running the model"),
            std::string::npos)
      << r.bytes;
  EXPECT_FALSE(p->alive());
  r = p->Call({1, "x"}, 5000, "running the model");
  EXPECT_NE(r.bytes.find("ended earlier: the sandboxed process exited with status 1"), std::string::npos) << r.bytes;
}

TEST_F(Sandbox, LongLivedChildThatNeverAnswersIsStoppedAtItsDeadline) {
  SandboxReply error;
  auto p = SandboxProcess::Start({}, Serve, &error);
  ASSERT_NE(p, nullptr);
  SandboxReply r = p->Call({3, ""}, 300, "running the model");
  EXPECT_EQ(r.code, NEE_STATUS_CANCELLED);
  EXPECT_NE(r.bytes.find("took longer than 0.3 s (running the model)"), std::string::npos) << r.bytes;
  EXPECT_FALSE(p->alive());
}

TEST_F(Sandbox, LongLivedChildThatStopsReadingCannotBlockTheParent) {
  SandboxReply error;
  auto p = SandboxProcess::Start({}, Serve, &error);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->Call({3, ""}, 200, "x").code, NEE_STATUS_CANCELLED);  // (killed)
  // A dead child: sending fails at once (EPIPE, no SIGPIPE for this process).
  SandboxReply r = p->Call({1, std::string(32 << 20, 'z')}, 0, "x");
  EXPECT_NE(r.bytes.find("ended earlier"), std::string::npos) << r.bytes;
}

TEST_F(Sandbox, InterruptReachesTheChildAsSigusr1) {
  SandboxReply error;
  auto p = SandboxProcess::Start({}, Serve, &error);
  ASSERT_NE(p, nullptr);
  std::atomic<bool> interrupt{false};
  std::thread setter([&] {
    usleep(100000);
    interrupt = true;
  });
  SandboxReply r = p->Call({6, ""}, 10000, "running the model", &interrupt);
  setter.join();
  EXPECT_EQ(r.code, NEE_STATUS_CANCELLED);
  EXPECT_EQ(r.bytes, "interrupted");
  EXPECT_TRUE(p->alive());
  EXPECT_EQ(p->Call({1, "after"}, 5000, "x").bytes, "echo:after");
}

TEST_F(Sandbox, LongLivedChildInheritsNoDescriptorButStdio) {
  int fd = open(file_.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  SandboxReply error;
  auto p = SandboxProcess::Start(
      {},
      [fd](SandboxChannel& channel) {
        char c;
        errno = 0;
        const bool readable = read(fd, &c, 1) == 1;
        channel.Send({NEE_STATUS_OK, readable ? "read the caller's file" : std::strerror(errno)});
      },
      &error);
  ASSERT_NE(p, nullptr);
  SandboxReply r = p->Receive(5000, "x");
  close(fd);
  EXPECT_EQ(r.bytes, std::strerror(EBADF));
}

}  // namespace
}  // namespace nee
