#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nee {

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
  if (is_mmap_ && data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace nee
