// A shared library opened with dlopen, closed when the last owner lets go.
// Errors name the path and say what the dynamic loader said.
#pragma once
#include <memory>
#include <string>

#include "base/status.h"

namespace nee {

class SharedLibrary {
 public:
  // Opens `path` (RTLD_NOW | RTLD_LOCAL: every symbol resolved now, none
  // visible to other libraries). A path without a '/' is searched for as
  // dlopen does (LD_LIBRARY_PATH, the system directories).
  static Result<std::shared_ptr<SharedLibrary>> Open(const std::string& path);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // The address of an exported symbol, or an error naming it and the path.
  Result<void*> Symbol(const char* name) const;
  const std::string& path() const { return path_; }

 private:
  SharedLibrary(std::string path, void* handle) : path_(std::move(path)), handle_(handle) {}
  std::string path_;
  void* handle_;
};

}  // namespace nee
