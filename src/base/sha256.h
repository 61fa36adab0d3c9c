// SHA-256 (FIPS 180-4), written here because nothing nee links provides it:
// lineage records and the ML-BOM name model files and weights by their hash.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace nee {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  void Update(const std::string& bytes) { Update(bytes.data(), bytes.size()); }
  // The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> Final();
  // The digest as 64 lowercase hex digits.
  std::string HexFinal();

 private:
  void Block(const uint8_t* block);
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// Lowercase hex SHA-256 of `size` bytes.
std::string Sha256Hex(const void* data, size_t size);
// Lowercase hex SHA-256 of a file's contents (mapped, not read into memory).
Result<std::string> Sha256OfFile(const std::string& path);

}  // namespace nee
