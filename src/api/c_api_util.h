// Helpers shared by the C API's files (c_api.cc: sessions; c_api_value.cc:
// values; c_api_options.cc: session and run options; c_api_model_tools.cc:
// the model file tools): status construction, the exception guard, value
// wrapping, string output and what a session describes. Internal to api/.
#pragma once
#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "api/c_api_internal.h"
#include "api/sandboxed_session.h"
#include "nee/nee.h"

namespace nee::c_api_util {

inline nee_status_t MakeStatus(const nee::Status& s) {
  if (s.ok()) return nullptr;
  auto* st = new (std::nothrow) nee_status_impl{static_cast<nee_status_code_t>(s.code()), s.message()};
  return st;  // on allocation failure NULL would mean OK; accept that corner
}
inline nee_status_t Err(nee_status_code_t code, const char* msg) {
  return new (std::nothrow) nee_status_impl{code, msg};
}
inline nee_status_t NullArg(const char* what) { return Err(NEE_STATUS_INVALID_ARGUMENT, (std::string(what) + " is NULL").c_str()); }

// Runs `fn`, converting any escaping C++ exception (allocation failure) into a status.
template <typename Fn>
inline nee_status_t Guard(Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Err(NEE_STATUS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return Err(NEE_STATUS_RUNTIME_ERROR, e.what());
  } catch (...) {
    return Err(NEE_STATUS_RUNTIME_ERROR, "unknown internal error");
  }
}

inline nee_value_t* Wrap(nee::Value v) { return new nee_value_impl{std::move(v)}; }

// What a session describes, from the session in this process or from a
// sandboxed session's description (api/sandboxed_session.h).
inline const std::vector<nee::ValueInfo>& InputsOf(const nee_session_t* s) {
  return s->sandbox ? s->sandbox->inputs : s->session->inputs();
}
inline const std::vector<nee::ValueInfo>& OutputsOf(const nee_session_t* s) {
  return s->sandbox ? s->sandbox->outputs : s->session->outputs();
}
inline const std::vector<nee::ValueInfo>& OverridableOf(const nee_session_t* s) {
  return s->sandbox ? s->sandbox->overridable : s->session->overridable_initializers();
}
inline const nee::Model& ModelOf(const nee_session_t* s) { return s->sandbox ? s->sandbox->model : s->session->model(); }

inline void FillString(const std::string& s, char* buffer, size_t capacity, size_t* out_length) {
  if (out_length) *out_length = s.size();
  if (buffer && capacity > 0) {
    size_t n = std::min(capacity - 1, s.size());
    std::memcpy(buffer, s.data(), n);
    buffer[n] = '\0';
  }
}

}  // namespace nee::c_api_util
