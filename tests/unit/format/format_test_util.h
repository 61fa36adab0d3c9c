// Helpers shared by the format tests: fixture paths, temp folders, hex.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../paths_util.h"
#include "base/mapped_file.h"

namespace nee::testing_format {

inline std::string DataPath(const std::string& relative) {
  return std::string(NEE_TEST_DATA_DIR) + "/unit/format/data/" + relative;
}

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::shared_ptr<MappedFile> Bytes(const std::string& s) { return MappedFile::FromBytes(s.data(), s.size()); }

inline std::string HexToBytes(const std::string& hex) {
  std::string out;
  if (hex == "-") return out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

inline std::vector<int64_t> ParseDims(const std::string& s) {
  std::vector<int64_t> dims;
  if (s == "-") return dims;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) dims.push_back(std::stoll(item));
  return dims;
}

// A fresh folder under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "nee_format_XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    char* made = ::mkdtemp(buf.data());
    path_ = made ? made : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace nee::testing_format
