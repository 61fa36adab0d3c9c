// Sandboxed sessions (nee_session_options_set_sandbox, api/sandboxed_session.h):
// a session whose model is loaded and run in a confined child process must
// answer like the same session in this process, and a child that dies must
// turn into errors, never a hang, a crash or a zombie here.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../paths_util.h"
#include "api/sandboxed_session.h"
#include "base/sandbox.h"
#include "nee/nee.h"

namespace {

std::string CnnModel() { return std::string(NEE_TEST_DATA_DIR) + "/models/torch/cnn_opset13/model.onnx"; }
std::string CnnInput() { return std::string(NEE_TEST_DATA_DIR) + "/models/torch/cnn_opset13/input_0.npy"; }

std::string Take(nee_status_t st, nee_status_code_t* code = nullptr) {
  if (code) *code = nee_status_code(st);
  std::string m = st ? nee_status_message(st) : "";
  nee_status_free(st);
  return m;
}

nee_session_t* Create(const std::string& path, bool sandbox, std::string* error = nullptr,
                      nee_status_code_t* code = nullptr) {
  nee_session_options_t* options = nullptr;
  EXPECT_EQ(nee_session_options_create(&options), nullptr);
  nee_session_options_set_intra_op_threads(options, 2);
  nee_session_options_set_sandbox(options, sandbox ? 1 : 0);
  nee_session_t* session = nullptr;
  std::string message = Take(nee_session_create_from_file(path.c_str(), options, &session), code);
  if (error) *error = message;
  nee_session_options_release(options);
  return session;
}

// Runs with the one input; returns the error ("" on success) and the output.
std::string RunOnce(nee_session_t* s, const nee_value_t* input, nee_value_t** out,
                    const char* input_name = nullptr, nee_status_code_t* code = nullptr) {
  nee_value_info_t info;
  EXPECT_EQ(nee_session_value_info(s, NEE_LIST_INPUTS, 0, &info), nullptr);
  const char* name = input_name ? input_name : info.name;
  *out = nullptr;
  return Take(nee_session_run(s, &name, &input, 1, nullptr, 0, out), code);
}

bool SameBytes(const nee_value_t* a, const nee_value_t* b) {
  return nee_value_data_size(a) == nee_value_data_size(b) && nee_value_rank(a) == nee_value_rank(b) &&
         std::memcmp(nee_value_data(a), nee_value_data(b), nee_value_data_size(a)) == 0;
}

class SandboxedSession : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!nee::SandboxSupported(&why)) GTEST_SKIP() << why;
    ASSERT_EQ(nee_value_load_file(CnnInput().c_str(), &input_), nullptr);
  }
  void TearDown() override { nee_value_release(input_); }
  nee_value_t* input_ = nullptr;
};

TEST_F(SandboxedSession, AnswersLikeTheSessionInThisProcess) {
  nee_session_t* plain = Create(CnnModel(), false);
  nee_session_t* boxed = Create(CnnModel(), true);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(boxed, nullptr);
  EXPECT_GT(nee::SandboxChildPid(boxed), 0);
  EXPECT_EQ(nee::SandboxChildPid(plain), -1);
  ASSERT_EQ(nee_session_input_count(boxed), nee_session_input_count(plain));
  ASSERT_EQ(nee_session_output_count(boxed), nee_session_output_count(plain));
  for (int list : {NEE_LIST_INPUTS, NEE_LIST_OUTPUTS}) {
    nee_value_info_t a, b;
    ASSERT_EQ(nee_session_value_info(plain, list, 0, &a), nullptr);
    ASSERT_EQ(nee_session_value_info(boxed, list, 0, &b), nullptr);
    EXPECT_STREQ(a.name, b.name);
    EXPECT_STREQ(a.type, b.type);
    EXPECT_EQ(a.element_type, b.element_type);
    ASSERT_EQ(a.rank, b.rank);
    for (int64_t d = 0; d < a.rank; ++d) {
      int64_t sa, sb;
      const char *ya, *yb;
      ASSERT_EQ(nee_session_value_dim(plain, list, 0, d, &sa, &ya), nullptr);
      ASSERT_EQ(nee_session_value_dim(boxed, list, 0, d, &sb, &yb), nullptr);
      EXPECT_EQ(sa, sb);
      EXPECT_STREQ(ya, yb);
    }
  }
  for (const char* key : {"producer_name", "opsets", "ir_version", "graph_name"}) {
    char a[256], b[256];
    size_t la = 0, lb = 0;
    ASSERT_EQ(nee_session_metadata(plain, key, a, sizeof a, &la), nullptr);
    ASSERT_EQ(nee_session_metadata(boxed, key, b, sizeof b, &lb), nullptr);
    EXPECT_STREQ(a, b) << key;
  }
  nee_model_stats_t sa, sb;
  ASSERT_EQ(nee_session_model_stats(plain, &sa), nullptr);
  ASSERT_EQ(nee_session_model_stats(boxed, &sb), nullptr);
  EXPECT_EQ(sa.node_count, sb.node_count);
  EXPECT_EQ(sa.parameter_bytes, sb.parameter_bytes);
  EXPECT_EQ(nee_session_op_type_count(plain), nee_session_op_type_count(boxed));

  nee_value_t* expected = nullptr;
  ASSERT_EQ(RunOnce(plain, input_, &expected), "");
  for (int run = 0; run < 5; ++run) {  // repeated runs on one child
    nee_value_t* got = nullptr;
    ASSERT_EQ(RunOnce(boxed, input_, &got), "");
    EXPECT_TRUE(SameBytes(expected, got)) << "run " << run;
    nee_value_release(got);
  }
  nee_value_release(expected);
  nee_session_release(plain);
  nee_session_release(boxed);
}

TEST_F(SandboxedSession, ErrorsKeepTheirCodeAndMessageAndTheSessionStaysUsable) {
  nee_session_t* plain = Create(CnnModel(), false);
  nee_session_t* boxed = Create(CnnModel(), true);
  ASSERT_NE(boxed, nullptr);
  nee_value_t* out = nullptr;
  nee_status_code_t ca, cb;
  std::string a = RunOnce(plain, input_, &out, "no_such_input", &ca);
  std::string b = RunOnce(boxed, input_, &out, "no_such_input", &cb);
  EXPECT_FALSE(b.empty());
  EXPECT_EQ(a, b);
  EXPECT_EQ(ca, cb);
  // A wrong shape: the message names the input, as in this process.
  int64_t dims[] = {1, 2};
  float data[2] = {1, 2};
  nee_value_t* wrong = nullptr;
  ASSERT_EQ(nee_value_create_tensor(NEE_DTYPE_FLOAT32, dims, 2, data, sizeof data, &wrong), nullptr);
  a = RunOnce(plain, wrong, &out, nullptr, &ca);
  b = RunOnce(boxed, wrong, &out, nullptr, &cb);
  EXPECT_FALSE(b.empty());
  EXPECT_EQ(a, b);
  EXPECT_EQ(ca, cb);
  nee_value_release(wrong);
  ASSERT_EQ(RunOnce(boxed, input_, &out), "");
  nee_value_release(out);
  nee_session_release(plain);
  nee_session_release(boxed);
}

TEST_F(SandboxedSession, ABadModelFailsCreationWithTheUnsandboxedMessage) {
  std::string path = std::string(NEE_TEST_DATA_DIR) + "/unit/api/data/external_bias.onnx";
  std::string a, b;
  nee_status_code_t ca, cb;
  EXPECT_EQ(Create(path, false, &a, &ca), nullptr);
  EXPECT_EQ(Create(path, true, &b, &cb), nullptr);
  EXPECT_FALSE(b.empty());
  EXPECT_EQ(a, b);
  EXPECT_EQ(ca, cb);
}

TEST_F(SandboxedSession, ADeadChildIsAnErrorOnThatRunAndLaterOnesNeverAHang) {
  nee_session_t* boxed = Create(CnnModel(), true);
  ASSERT_NE(boxed, nullptr);
  const pid_t pid = nee::SandboxChildPid(boxed);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGSEGV), 0);  // standing in for a crash in a kernel
  nee_value_t* out = nullptr;
  nee_status_code_t code;
  std::string first = RunOnce(boxed, input_, &out, nullptr, &code);
  EXPECT_EQ(code, NEE_STATUS_RUNTIME_ERROR);
  EXPECT_NE(first.find("killed by signal 11"), std::string::npos) << first;
  std::string second = RunOnce(boxed, input_, &out, nullptr, &code);
  EXPECT_NE(second.find("ended earlier"), std::string::npos) << second;
  EXPECT_NE(second.find("signal 11"), std::string::npos) << second;
  // Already reaped: no zombie.
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  nee_session_release(boxed);
}

TEST_F(SandboxedSession, ReleaseKillsAndReapsTheChild) {
  nee_session_t* boxed = Create(CnnModel(), true);
  ASSERT_NE(boxed, nullptr);
  const pid_t pid = nee::SandboxChildPid(boxed);
  ASSERT_EQ(kill(pid, 0), 0);
  nee_session_release(boxed);
  EXPECT_EQ(kill(pid, 0), -1);  // gone, not a zombie (a zombie still answers kill 0)
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(SandboxedSession, ConcurrentCallersGetTheirOwnResults) {
  nee_session_t* plain = Create(CnnModel(), false);
  nee_session_t* boxed = Create(CnnModel(), true);
  ASSERT_NE(boxed, nullptr);
  nee_value_t* expected = nullptr;
  ASSERT_EQ(RunOnce(plain, input_, &expected), "");
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        nee_value_t* got = nullptr;
        if (RunOnce(boxed, input_, &got) == "" && SameBytes(expected, got)) ++ok[t];
        nee_value_release(got);
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 3);
  nee_value_release(expected);
  nee_session_release(plain);
  nee_session_release(boxed);
}

// What /proc says of the child: confined by seccomp filters, no new privileges.
TEST_F(SandboxedSession, TheChildIsUnderSeccompFilters) {
  nee_session_t* boxed = Create(CnnModel(), true);
  ASSERT_NE(boxed, nullptr);
  FILE* f = std::fopen(("/proc/" + std::to_string(nee::SandboxChildPid(boxed)) + "/status").c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string status;
  char line[512];
  while (std::fgets(line, sizeof line, f)) status += line;
  std::fclose(f);
  EXPECT_NE(status.find("Seccomp:\t2"), std::string::npos) << status;
  EXPECT_NE(status.find("NoNewPrivs:\t1"), std::string::npos) << status;
  nee_session_release(boxed);
}

TEST_F(SandboxedSession, CustomOpsAndProfilingAreRefused) {
  nee_session_options_t* options = nullptr;
  ASSERT_EQ(nee_session_options_create(&options), nullptr);
  nee_session_options_set_sandbox(options, 1);
  EXPECT_EQ(nee_session_options_get_sandbox(options), 1);
  ASSERT_EQ(nee_session_options_set_profiling(options, "/tmp/nee_sandbox_profile"), nullptr);
  nee_session_t* session = nullptr;
  nee_status_code_t code;
  std::string m = Take(nee_session_create_from_file(CnnModel().c_str(), options, &session), &code);
  EXPECT_EQ(code, NEE_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(m.find("cannot profile"), std::string::npos) << m;
  EXPECT_NE(Take(nee_session_options_set_sandbox_limits(options, -1, 0), &code), "");
  nee_session_options_release(options);
}

}  // namespace
