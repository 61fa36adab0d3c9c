#include "base/status.h"

namespace nee {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidModel: return "InvalidModel";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotImplemented: return "NotImplemented";
    case StatusCode::kOutOfMemory: return "OutOfMemory";
    case StatusCode::kRuntime: return "RuntimeError";
    case StatusCode::kIo: return "IoError";
    case StatusCode::kCancelled: return "Cancelled";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) state_ = std::make_shared<State>(State{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code())) + ": " + message();
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code(), context + message());
}

Status InvalidModel(std::string m) { return Status(StatusCode::kInvalidModel, std::move(m)); }
Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
Status NotImplemented(std::string m) { return Status(StatusCode::kNotImplemented, std::move(m)); }
Status OutOfMemory(std::string m) { return Status(StatusCode::kOutOfMemory, std::move(m)); }
Status RuntimeError(std::string m) { return Status(StatusCode::kRuntime, std::move(m)); }
Status IoError(std::string m) { return Status(StatusCode::kIo, std::move(m)); }
Status Cancelled(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }

}  // namespace nee
