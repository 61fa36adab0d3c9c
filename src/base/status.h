// One error model for the whole library: functions that can fail return a
// Status (or a Result<T>). Nothing below the C API throws on bad input.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <variant>

namespace nee {

enum class StatusCode : int {
  kOk = 0,
  kInvalidModel = 1,     // the model file or graph is malformed or inconsistent
  kInvalidArgument = 2,  // the caller passed something wrong (input shape, dtype, path)
  kNotImplemented = 3,   // valid, but not supported by nee (yet)
  kOutOfMemory = 4,      // an allocation failed or exceeded a limit
  kRuntime = 5,          // a failure while running (kernel error, internal bug)
  kIo = 6,               // a file could not be opened, mapped or written
  kCancelled = 7,        // a run was stopped: terminated by the caller or over its time limit
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);
  static Status Ok() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "InvalidModel: message"
  std::string ToString() const;
  // Prepends context ("node 'conv1' (Conv): ") to the message, keeping the code.
  Status WithContext(const std::string& context) const;

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

Status InvalidModel(std::string message);
Status InvalidArgument(std::string message);
Status NotImplemented(std::string message);
Status OutOfMemory(std::string message);
Status RuntimeError(std::string message);
Status IoError(std::string message);
Status Cancelled(std::string message);

// A value or an error. Deliberately small: value(), status(), ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(data_);
  }
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace nee

#define NEE_CONCAT_INNER(a, b) a##b
#define NEE_CONCAT(a, b) NEE_CONCAT_INNER(a, b)

// Returns early with the status if `expr` failed.
#define NEE_RETURN_IF_ERROR(expr)                 \
  do {                                            \
    ::nee::Status nee_status_tmp_ = (expr);       \
    if (!nee_status_tmp_.ok()) return nee_status_tmp_; \
  } while (0)

// `NEE_ASSIGN_OR_RETURN(auto x, MakeX());`
#define NEE_ASSIGN_OR_RETURN(lhs, expr) \
  NEE_ASSIGN_OR_RETURN_IMPL(NEE_CONCAT(nee_result_, __LINE__), lhs, expr)
#define NEE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
