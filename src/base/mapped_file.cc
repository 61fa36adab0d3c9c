#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

namespace nee {

namespace {

// The live file mappings: start -> size.
struct MappingRegistry {
  std::mutex mu;
  std::map<uintptr_t, size_t> ranges;
};

MappingRegistry& Registry() {
  static MappingRegistry* registry = new MappingRegistry();  // never destroyed: used by destructors at exit
  return *registry;
}

// Whether [begin, end) lies inside one live file mapping; the caller holds the registry's lock.
bool InsideOneMapping(const MappingRegistry& registry, uintptr_t begin, uintptr_t end) {
  auto it = registry.ranges.upper_bound(begin);
  if (it == registry.ranges.begin()) return false;
  --it;
  return end <= it->first + it->second;
}

}  // namespace

bool IsInMappedFile(const void* data, size_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  MappingRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  return InsideOneMapping(registry, begin, begin + bytes);
}

void ReleaseFileBackedPages(const void* data, size_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data), end = begin + bytes;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (bytes == 0 || first >= last) return;
  MappingRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  if (!InsideOneMapping(registry, begin, end)) return;
  ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

Result<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError("'" + path + "' is not a regular file");
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return IoError("cannot map '" + path + "': " + std::strerror(errno));
    }
    file->data_ = static_cast<const uint8_t*>(p);
    file->is_mmap_ = true;
    MappingRegistry& registry = Registry();
    std::lock_guard<std::mutex> lock(registry.mu);
    registry.ranges[reinterpret_cast<uintptr_t>(p)] = file->size_;
  }
  ::close(fd);
  return file;
}

std::shared_ptr<MappedFile> MappedFile::FromBytes(const void* data, size_t size) {
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->owned_.reset(new uint8_t[size > 0 ? size : 1]);
  if (size > 0) std::memcpy(file->owned_.get(), data, size);
  file->data_ = file->owned_.get();
  file->size_ = size;
  file->path_ = "<memory>";
  return file;
}

MappedFile::~MappedFile() {
  if (!is_mmap_ || !data_) return;
  {
    MappingRegistry& registry = Registry();
    std::lock_guard<std::mutex> lock(registry.mu);
    registry.ranges.erase(reinterpret_cast<uintptr_t>(data_));
  }
  ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace nee
