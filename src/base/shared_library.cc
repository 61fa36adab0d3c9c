#include "base/shared_library.h"

#include <dlfcn.h>

#include <mutex>

namespace nee {

namespace {
// dlerror's state is per thread, but the message buffer may be shared with
// other threads' calls on some systems: take it under one lock.
std::mutex& LoaderMutex() {
  static std::mutex mu;
  return mu;
}
}  // namespace

Result<std::shared_ptr<SharedLibrary>> SharedLibrary::Open(const std::string& path) {
  if (path.empty()) return InvalidArgument("custom-op library: the path is empty");
  std::lock_guard<std::mutex> lock(LoaderMutex());
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return InvalidArgument("cannot load the library '" + path + "': " + (why ? why : "unknown dlopen error"));
  }
  return std::shared_ptr<SharedLibrary>(new SharedLibrary(path, handle));
}

SharedLibrary::~SharedLibrary() {
  std::lock_guard<std::mutex> lock(LoaderMutex());
  dlclose(handle_);
}

Result<void*> SharedLibrary::Symbol(const char* name) const {
  std::lock_guard<std::mutex> lock(LoaderMutex());
  dlerror();
  void* address = dlsym(handle_, name);
  const char* why = dlerror();
  if (why || !address)
    return InvalidArgument("the library '" + path_ + "' does not export '" + name + "'" +
                           (why ? std::string(" (") + why + ")" : std::string()));
  return address;
}

}  // namespace nee
