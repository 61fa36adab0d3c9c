// The process-wide cache of compiled forests (see ml_tree_cache.h).
#include "ops/ml_tree_cache.h"

#include <cstring>
#include <string>

namespace nee::ml_tree {

namespace {

class Hasher {
 public:
  void Add(uint64_t v) { h_ = Mix(h_, v); }
  void AddBytes(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    Add(n);
    // Four independent lanes: the multiplications of different lanes overlap.
    uint64_t l0 = h_, l1 = h_ ^ 1, l2 = h_ ^ 2, l3 = h_ ^ 3;
    for (; n >= 32; n -= 32, p += 32) {
      l0 = Mix(l0, Load(p));
      l1 = Mix(l1, Load(p + 8));
      l2 = Mix(l2, Load(p + 16));
      l3 = Mix(l3, Load(p + 24));
    }
    Add(l0), Add(l1), Add(l2), Add(l3);
    for (; n >= 8; n -= 8, p += 8) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      Add(v);
    }
    uint64_t tail = 0;
    for (size_t k = 0; k < n; ++k) tail = (tail << 8) | static_cast<unsigned char>(p[k]);
    Add(tail);
  }
  void AddString(const std::string& s) { AddBytes(s.data(), s.size()); }
  // Many short strings (nodes_modes): one value per string, in four lanes.
  void AddStrings(const std::vector<std::string>& strings) {
    Add(strings.size());
    uint64_t l0 = h_, l1 = h_ ^ 1;
    size_t i = 0;
    for (; i + 2 <= strings.size(); i += 2) {
      l0 = Mix(l0, ShortValue(strings[i]));
      l1 = Mix(l1, ShortValue(strings[i + 1]));
    }
    if (i < strings.size()) l0 = Mix(l0, ShortValue(strings[i]));
    Add(l0), Add(l1);
  }
  uint64_t value() const { return h_; }

 private:
  static uint64_t Load(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  // A string folded into one word (exact for strings of up to 7 bytes, a
  // further mix beyond): its length and bytes.
  static uint64_t ShortValue(const std::string& s) {
    uint64_t x = s.size();
    for (unsigned char c : s) x = (x << 8 | x >> 56) ^ c;
    return x;
  }
  // One 64x64->128 multiply, folded (as in wyhash/mum): fast and well mixed.
  static uint64_t Mix(uint64_t a, uint64_t v) {
    unsigned __int128 m = static_cast<unsigned __int128>(a ^ v) * 0x9E3779B97F4A7C15ull;
    return static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
  }
  uint64_t h_ = 0xCBF29CE484222325ull;
};

}  // namespace

uint64_t HashAttributes(const Node& node) {
  Hasher h;
  h.AddString(node.op_type);
  for (const Attribute& a : node.attributes) {
    h.AddString(a.name);
    h.Add(static_cast<uint64_t>(a.type));
    h.Add(static_cast<uint64_t>(a.i));
    uint32_t f_bits;
    std::memcpy(&f_bits, &a.f, 4);
    h.Add(f_bits);
    h.AddString(a.s);
    h.AddBytes(a.ints.data(), a.ints.size() * sizeof(int64_t));
    h.AddBytes(a.floats.data(), a.floats.size() * sizeof(float));
    h.AddStrings(a.strings);
    if (a.t.defined()) {
      h.Add(static_cast<uint64_t>(a.t.dtype()));
      for (int64_t d : a.t.dims()) h.Add(static_cast<uint64_t>(d));
      if (a.t.dtype() == DataType::kString) {
        for (const std::string& str : a.t.span<std::string>()) h.AddString(str);
      } else {
        h.AddBytes(a.t.raw_data(), a.t.byte_size());
      }
    }
  }
  return h.value();
}

}  // namespace nee::ml_tree
