#include "format/external_data.h"

#include <climits>
#include <cstdlib>

namespace nee::format {

namespace {

// Parses a non-negative decimal integer stored as a string ("offset", "length").
bool ParseDecimal(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

Result<std::string> RealPath(const std::string& path) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) return IoError("cannot resolve '" + path + "'");
  return std::string(buffer);
}

}  // namespace

Status CheckExternalLocation(const std::string& location) {
  if (location.empty()) return InvalidModel("empty external data location");
  if (location.find('\0') != std::string::npos) return InvalidModel("external data location contains NUL");
  if (location[0] == '/' || location[0] == '\\' || (location.size() > 1 && location[1] == ':'))
    return InvalidModel("absolute external data path '" + location + "' is not allowed");
  // Split on both separators: a '..' between backslashes is as dangerous on
  // a system that treats them as separators.
  size_t start = 0;
  while (start <= location.size()) {
    size_t end = location.find_first_of("/\\", start);
    if (end == std::string::npos) end = location.size();
    if (location.compare(start, end - start, "..") == 0)
      return InvalidModel("external data path '" + location + "' has a '..' component");
    start = end + 1;
  }
  return Status::Ok();
}

Result<std::shared_ptr<MappedFile>> ExternalDataResolver::Map(const std::string& tensor_name,
                                                              const std::string& location) {
  const std::string who = "tensor '" + tensor_name + "': ";
  if (base_dir_.empty())
    return InvalidModel(who + "external data '" + location +
                        "' cannot be used: the model was not loaded from a folder (no base_dir)");
  Status lexical = CheckExternalLocation(location);
  if (!lexical.ok()) return lexical.WithContext(who);
  if (real_base_.empty()) {
    auto base = RealPath(base_dir_);
    if (!base.ok()) return IoError(who + "cannot resolve the model folder '" + base_dir_ + "'");
    real_base_ = base.value();
  }
  auto real = RealPath(base_dir_ + "/" + location);
  if (!real.ok()) return IoError(who + "external data file '" + location + "' not found in '" + base_dir_ + "'");
  const std::string& real_path = real.value();
  std::string prefix = real_base_ == "/" ? "/" : real_base_ + "/";
  if (real_path.compare(0, prefix.size(), prefix) != 0)
    return InvalidModel(who + "external data path '" + location + "' resolves to '" + real_path +
                        "', outside the model folder '" + real_base_ + "'");
  auto it = files_.find(real_path);
  if (it != files_.end()) return it->second;
  auto mapped = MappedFile::Open(real_path);
  if (!mapped.ok()) return mapped.status().WithContext(who);
  files_[real_path] = mapped.value();
  return mapped.value();
}

Result<ExternalSlice> ExternalDataResolver::Resolve(
    const std::string& tensor_name, const std::vector<std::pair<std::string, std::string>>& entries,
    size_t expected_bytes) {
  const std::string who = "tensor '" + tensor_name + "': ";
  std::string location;
  uint64_t offset = 0, length = 0;
  bool has_location = false, has_length = false;
  for (const auto& [key, value] : entries) {
    if (key == "location") {
      location = value;
      has_location = true;
    } else if (key == "offset") {
      if (!ParseDecimal(value, &offset)) return InvalidModel(who + "invalid external data offset '" + value + "'");
    } else if (key == "length") {
      if (!ParseDecimal(value, &length)) return InvalidModel(who + "invalid external data length '" + value + "'");
      has_length = true;
    }
    // "checksum" (SHA1 of the file) and unknown keys are not verified.
  }
  if (!has_location) return InvalidModel(who + "external data without a 'location'");
  NEE_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, Map(tensor_name, location));
  uint64_t file_size = file->size();
  if (offset > file_size)
    return InvalidModel(who + "external data offset " + std::to_string(offset) + " is past the end of '" +
                        location + "' (" + std::to_string(file_size) + " bytes)");
  if (!has_length) length = file_size - offset;
  if (length > file_size - offset)
    return InvalidModel(who + "external data [" + std::to_string(offset) + ", +" + std::to_string(length) +
                        ") exceeds '" + location + "' (" + std::to_string(file_size) + " bytes)");
  if (length != expected_bytes)
    return InvalidModel(who + "external data length " + std::to_string(length) + " does not match the " +
                        std::to_string(expected_bytes) + " bytes its shape needs ('" + location + "')");
  if (max_total_bytes_ > 0 && length > static_cast<uint64_t>(max_total_bytes_) - resolved_bytes_)
    return InvalidModel(who + "external data '" + location + "' would bring the model's external data to " +
                        std::to_string(resolved_bytes_ + length) + " bytes, over the limit of " +
                        std::to_string(max_total_bytes_) + " (SessionOptions max_external_data_bytes)");
  resolved_bytes_ += length;
  ExternalSlice slice;
  slice.data = file->data() + offset;
  slice.size = static_cast<size_t>(length);
  slice.file = std::move(file);
  return slice;
}

std::vector<std::shared_ptr<MappedFile>> ExternalDataResolver::mappings() const {
  std::vector<std::shared_ptr<MappedFile>> out;
  for (const auto& [path, file] : files_) out.push_back(file);
  return out;
}

}  // namespace nee::format
