// A read-only memory mapping of a whole file. Tensors that view initializer
// bytes keep a shared_ptr to the mapping so it outlives the model if needed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace nee {

// Drops the resident pages that lie wholly inside [data, data + bytes) when
// that range is part of a file mapped by MappedFile::Open; does nothing for
// other memory. The mapping is read-only and private, so the bytes stay
// readable: a later access reads them from the file again. Kernels call it
// once they have packed a constant weight into a layout of their own, so the
// process does not keep both copies resident.
void ReleaseFileBackedPages(const void* data, size_t bytes);
// Whether [data, data + bytes) lies inside a file mapped by MappedFile::Open
// (read-only: such bytes must never be written).
bool IsInMappedFile(const void* data, size_t bytes);

class MappedFile {
 public:
  static Result<std::shared_ptr<MappedFile>> Open(const std::string& path);
  // Wraps caller-owned bytes (model passed from memory); copies them so the
  // model does not depend on the caller keeping the buffer alive.
  static std::shared_ptr<MappedFile> FromBytes(const void* data, size_t size);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool is_mmap_ = false;
  std::unique_ptr<uint8_t[]> owned_;
  std::string path_;
};

}  // namespace nee
