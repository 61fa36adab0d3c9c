// Resolves TensorProto external data (location / offset / length keys) to a
// slice of a mapped file, refusing any path that could leave the model's
// folder: absolute paths, '..' components, and symlinks resolving outside.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"

namespace nee::format {

struct ExternalSlice {
  std::shared_ptr<MappedFile> file;
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// Checks a location string lexically: relative, no '..' component, no NUL.
Status CheckExternalLocation(const std::string& location);

// One per model load: caches one mapping per external file.
class ExternalDataResolver {
 public:
  // `max_total_bytes` (<= 0: none) bounds the bytes all resolved slices claim together.
  explicit ExternalDataResolver(std::string base_dir, int64_t max_total_bytes = 0)
      : base_dir_(std::move(base_dir)), max_total_bytes_(max_total_bytes) {}

  // `entries` are the tensor's external_data key/value pairs; the slice must
  // hold exactly `expected_bytes`. Errors name the tensor and the path.
  Result<ExternalSlice> Resolve(const std::string& tensor_name,
                                const std::vector<std::pair<std::string, std::string>>& entries,
                                size_t expected_bytes);

  // Files mapped so far (for Model::mappings).
  std::vector<std::shared_ptr<MappedFile>> mappings() const;

 private:
  Result<std::shared_ptr<MappedFile>> Map(const std::string& tensor_name, const std::string& location);

  std::string base_dir_;
  int64_t max_total_bytes_ = 0;
  uint64_t resolved_bytes_ = 0;  // sum of the slices handed out so far
  std::string real_base_;  // realpath(base_dir_), computed on first use
  std::map<std::string, std::shared_ptr<MappedFile>> files_;  // by real path
};

}  // namespace nee::format
