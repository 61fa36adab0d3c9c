#include "format/npy.h"

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <string_view>

namespace nee {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kAlign = 64;  // numpy's ARRAY_ALIGN

struct DtypeRow {
  const char* descr;  // without the byte-order character
  DataType type;
};
constexpr DtypeRow kDtypes[] = {
    {"f2", DataType::kFloat16}, {"f4", DataType::kFloat},   {"f8", DataType::kDouble},
    {"c8", DataType::kComplex64}, {"c16", DataType::kComplex128},
    {"i1", DataType::kInt8},    {"i2", DataType::kInt16},   {"i4", DataType::kInt32},
    {"i8", DataType::kInt64},   {"u1", DataType::kUint8},   {"u2", DataType::kUint16},
    {"u4", DataType::kUint32},  {"u8", DataType::kUint64},  {"b1", DataType::kBool},
};

// The header is a Python dict literal:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  Status Parse(Header* h) {
    bool has_descr = false, has_order = false, has_shape = false;
    SkipSpace();
    if (!Eat('{')) return Error("expected '{'");
    while (true) {
      SkipSpace();
      if (Eat('}')) break;
      std::string key;
      NEE_RETURN_IF_ERROR(String(&key));
      SkipSpace();
      if (!Eat(':')) return Error("expected ':' after '" + key + "'");
      SkipSpace();
      if (key == "descr") {
        if (Peek() != '\'' && Peek() != '"') return NotImplemented("npy: structured dtypes are not supported");
        NEE_RETURN_IF_ERROR(String(&h->descr));
        has_descr = true;
      } else if (key == "fortran_order") {
        if (Match("True")) {
          h->fortran_order = true;
        } else if (Match("False")) {
          h->fortran_order = false;
        } else {
          return Error("fortran_order must be True or False");
        }
        has_order = true;
      } else if (key == "shape") {
        NEE_RETURN_IF_ERROR(Tuple(&h->shape));
        has_shape = true;
      } else {
        return Error("unexpected key '" + key + "'");
      }
      SkipSpace();
      if (Eat(',')) continue;
      SkipSpace();
      if (Eat('}')) break;
      return Error("expected ',' or '}'");
    }
    if (!has_descr || !has_order || !has_shape) return Error("missing descr, fortran_order or shape");
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("npy header: " + what + " at character " + std::to_string(i_));
  }
  char Peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool Eat(char c) {
    if (Peek() != c) return false;
    ++i_;
    return true;
  }
  bool Match(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  void SkipSpace() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  Status String(std::string* out) {
    char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a string");
    ++i_;
    size_t end = s_.find(quote, i_);
    if (end == std::string_view::npos) return Error("unterminated string");
    *out = std::string(s_.substr(i_, end - i_));
    i_ = end + 1;
    return Status::Ok();
  }
  Status Tuple(std::vector<int64_t>* out) {
    if (!Eat('(')) return Error("expected a shape tuple");
    while (true) {
      SkipSpace();
      if (Eat(')')) return Status::Ok();
      if (Peek() < '0' || Peek() > '9') return Error("expected a dimension");
      int64_t v = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        int digit = Peek() - '0';
        if (v > (INT64_MAX - digit) / 10) return Error("dimension too large");
        v = v * 10 + digit;
        ++i_;
      }
      Eat('L');  // Python 2 long suffix in old files
      out->push_back(v);
      SkipSpace();
      if (Eat(',')) continue;
      SkipSpace();
      if (Eat(')')) return Status::Ok();
      return Error("expected ',' or ')'");
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

Result<DataType> DtypeFromDescr(const std::string& descr) {
  if (descr.size() < 2) return InvalidArgument("npy: unsupported dtype '" + descr + "'");
  char order = descr[0];
  std::string code = descr.substr(1);
  for (const DtypeRow& row : kDtypes) {
    if (code != row.descr) continue;
    bool single_byte = ElementBits(row.type) == 8;
    if (order == '>' && !single_byte) return NotImplemented("npy: big-endian arrays ('" + descr + "') are not supported");
    if (order != '<' && order != '|' && order != '=' && !(order == '>' && single_byte))
      return InvalidArgument("npy: unsupported byte order in '" + descr + "'");
    return row.type;
  }
  return NotImplemented("npy: unsupported dtype '" + descr + "'");
}

Result<std::string> DescrFor(DataType type) {
  for (const DtypeRow& row : kDtypes)
    if (row.type == type) return std::string(ElementBits(type) == 8 ? "|" : "<") + row.descr;
  return NotImplemented(std::string("npy: cannot store ") + DataTypeName(type) + " tensors");
}

// numpy's fixed-width string dtypes: 'U<n>' holds n UTF-32 code points per element, 'S<n>' n bytes;
// both pad shorter strings with zeros. ONNX string tensors hold UTF-8 (or arbitrary) bytes.
struct StringDtype {
  bool unicode = false;  // 'U' (UTF-32) rather than 'S' (bytes)
  int64_t width = 0;     // characters per element
  size_t item_bytes() const { return static_cast<size_t>(width) * (unicode ? 4 : 1); }
};

// Returns true and fills `out` when `descr` is a fixed-width string dtype.
Result<bool> ParseStringDescr(const std::string& descr, StringDtype* out) {
  if (descr.size() < 2 || (descr[1] != 'U' && descr[1] != 'S')) return false;
  char order = descr[0];
  out->unicode = descr[1] == 'U';
  if (order == '>' && out->unicode) return NotImplemented("npy: big-endian arrays ('" + descr + "') are not supported");
  if (order != '<' && order != '|' && order != '=' && order != '>')
    return InvalidArgument("npy: unsupported byte order in '" + descr + "'");
  if (descr.size() == 2 || descr.size() > 12) return InvalidArgument("npy: bad string width in '" + descr + "'");
  int64_t width = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9') return InvalidArgument("npy: bad string width in '" + descr + "'");
    width = width * 10 + (descr[i] - '0');
  }
  out->width = width;
  return true;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Decodes UTF-8; false when `s` is not valid UTF-8 (then it is written as bytes instead).
bool DecodeUtf8(const std::string& s, std::vector<uint32_t>* out) {
  out->clear();
  for (size_t i = 0; i < s.size();) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || i + static_cast<size_t>(extra) >= s.size()) return false;  // bad lead byte or cut short
    uint32_t cp = extra == 0 ? c : (c & (0x3F >> extra));
    for (int k = 1; k <= extra; ++k) {
      uint8_t cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    out->push_back(cp);
    i += 1 + extra;
  }
  return true;
}

Result<Tensor> ReadStringElements(const StringDtype& dt, const std::vector<int64_t>& shape, const uint8_t* data,
                                  size_t available, const std::string& descr) {
  NEE_ASSIGN_OR_RETURN(int64_t count, CheckedElementCount(shape));
  size_t item = dt.item_bytes();
  // A zero-width dtype ('S0', '<U0') would let a header claim any number of
  // elements with no bytes behind them; numpy never writes one with elements.
  bool fits = item == 0 ? available == 0 && count == 0
                        : static_cast<uint64_t>(count) <= available / item && static_cast<size_t>(count) * item == available;
  if (!fits)
    return InvalidArgument("npy: shape " + DimsToString(shape) + " of " + descr + " does not match the " +
                           std::to_string(available) + " bytes present");
  NEE_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DataType::kString, shape));
  std::string* out = t.data<std::string>();
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t* p = data + static_cast<size_t>(i) * item;
    std::string s;
    for (int64_t c = 0; c < dt.width; ++c) {
      if (!dt.unicode) {
        if (p[c] == 0) break;
        s.push_back(static_cast<char>(p[c]));
        continue;
      }
      const uint8_t* q = p + 4 * c;
      uint32_t cp = static_cast<uint32_t>(q[0]) | static_cast<uint32_t>(q[1]) << 8 | static_cast<uint32_t>(q[2]) << 16 |
                    static_cast<uint32_t>(q[3]) << 24;
      if (cp == 0) break;
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return InvalidArgument("npy: element " + std::to_string(i) + " of " + descr + " holds an invalid code point");
      AppendUtf8(cp, &s);
    }
    out[i] = std::move(s);
  }
  return t;
}

}  // namespace

Result<Tensor> ReadNpyBytes(std::shared_ptr<MappedFile> bytes) {
  const uint8_t* p = bytes->data();
  size_t size = bytes->size();
  if (size < kMagicSize + 4 || std::memcmp(p, kMagic, kMagicSize) != 0)
    return InvalidArgument("npy: not a .npy file (bad magic)");
  uint8_t major = p[6];
  size_t header_len = 0, prefix = 0;
  if (major == 1) {
    header_len = static_cast<size_t>(p[8]) | static_cast<size_t>(p[9]) << 8;
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return InvalidArgument("npy: truncated header");
    header_len = static_cast<size_t>(p[8]) | static_cast<size_t>(p[9]) << 8 | static_cast<size_t>(p[10]) << 16 |
                 static_cast<size_t>(p[11]) << 24;
    prefix = 12;
  } else {
    return NotImplemented("npy: format version " + std::to_string(major) + " is not supported");
  }
  if (header_len > size - prefix) return InvalidArgument("npy: truncated header");
  Header header;
  HeaderParser parser(std::string_view(reinterpret_cast<const char*>(p + prefix), header_len));
  NEE_RETURN_IF_ERROR(parser.Parse(&header));
  if (header.fortran_order)
    return NotImplemented("npy: Fortran-ordered arrays are not supported (save with np.ascontiguousarray)");
  StringDtype string_dtype;
  NEE_ASSIGN_OR_RETURN(bool is_string, ParseStringDescr(header.descr, &string_dtype));
  if (is_string)
    return ReadStringElements(string_dtype, header.shape, p + prefix + header_len, size - prefix - header_len,
                              header.descr);
  if (header.descr.size() >= 2 && header.descr[1] == 'O')
    return NotImplemented("npy: object arrays (pickled) are not supported; save strings with a fixed-width dtype, "
                          "e.g. np.save(path, array.astype(str))");
  NEE_ASSIGN_OR_RETURN(DataType type, DtypeFromDescr(header.descr));
  NEE_ASSIGN_OR_RETURN(int64_t count, CheckedElementCount(header.shape));
  size_t data_offset = prefix + header_len;
  size_t available = size - data_offset;
  // Compare in elements first so a huge shape cannot overflow the byte count.
  size_t item = static_cast<size_t>(ElementBits(type) / 8);
  if (static_cast<uint64_t>(count) > available / item || static_cast<size_t>(count) * item != available)
    return InvalidArgument("npy: shape " + DimsToString(header.shape) + " of " + header.descr + " needs " +
                           (static_cast<uint64_t>(count) > available / item
                                ? std::string("more than the ")
                                : std::to_string(static_cast<size_t>(count) * item) + " bytes, not the ") +
                           std::to_string(available) + " bytes present");
  const uint8_t* data = p + data_offset;
  bool aligned = reinterpret_cast<uintptr_t>(data) % (item > 8 ? 8 : item) == 0;
  if (aligned && type != DataType::kBool && count > 0)
    return Tensor::View(type, header.shape, const_cast<uint8_t*>(data), bytes);
  NEE_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(type, header.shape));
  if (type == DataType::kBool) {
    // Normalize: any non-zero byte is true, so kernels only ever see 0 / 1.
    uint8_t* out = t.data<uint8_t>();
    for (int64_t i = 0; i < count; ++i) out[i] = data[i] != 0;
  } else if (count > 0) {
    std::memcpy(t.raw_data(), data, t.byte_size());
  }
  return t;
}

Result<Tensor> ReadNpyFile(const std::string& path) {
  NEE_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  auto t = ReadNpyBytes(std::move(file));
  if (!t.ok()) return t.status().WithContext("'" + path + "': ");
  return t;
}

// Strings are written as numpy's '<U<n>' (n = the longest string in code points, at least 1) when every
// element is valid UTF-8, else as '|S<n>' bytes; np.load reads either.
std::string StringElementBytes(const Tensor& tensor, std::string* descr) {
  const std::string* in = tensor.data<std::string>();
  int64_t count = tensor.num_elements();
  std::vector<std::vector<uint32_t>> decoded(static_cast<size_t>(count));
  bool unicode = true;
  size_t width = 1;
  for (int64_t i = 0; i < count && unicode; ++i) unicode = DecodeUtf8(in[i], &decoded[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < count; ++i)
    width = std::max(width, unicode ? decoded[static_cast<size_t>(i)].size() : in[i].size());
  *descr = (unicode ? "<U" : "|S") + std::to_string(width);
  std::string out;
  out.reserve(static_cast<size_t>(count) * width * (unicode ? 4 : 1));
  for (int64_t i = 0; i < count; ++i) {
    if (unicode) {
      const auto& cps = decoded[static_cast<size_t>(i)];
      for (size_t c = 0; c < width; ++c) {
        uint32_t cp = c < cps.size() ? cps[c] : 0;
        for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((cp >> (8 * b)) & 0xFF));
      }
    } else {
      out += in[i];
      out.append(width - in[i].size(), '\0');
    }
  }
  return out;
}

Result<std::string> SerializeNpy(const Tensor& tensor) {
  if (!tensor.defined()) return InvalidArgument("npy: tensor has no element type");
  std::string descr, string_bytes;
  if (tensor.dtype() == DataType::kString) {
    string_bytes = StringElementBytes(tensor, &descr);
  } else {
    NEE_ASSIGN_OR_RETURN(descr, DescrFor(tensor.dtype()));
  }
  // Same text and padding as numpy.lib.format (numpy 1.x / 2.x).
  std::string shape = "(";
  for (size_t i = 0; i < tensor.dims().size(); ++i) {
    if (i) shape += ", ";
    shape += std::to_string(tensor.dims()[i]);
  }
  if (tensor.dims().size() == 1) shape += ",";
  shape += ")";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // numpy leaves room for the first axis to grow in place (GROWTH_AXIS_MAX_DIGITS = 21).
  if (!tensor.dims().empty()) {
    size_t digits = std::to_string(tensor.dims()[0]).size();
    if (digits < 21) dict.append(21 - digits, ' ');
  }
  bool v1 = dict.size() + 1 + kMagicSize + 4 + kAlign <= 65535;
  size_t prefix = kMagicSize + 2 + (v1 ? 2 : 4);
  size_t pad = kAlign - ((prefix + dict.size() + 1) % kAlign);
  size_t header_len = dict.size() + pad + 1;
  std::string out(kMagic, kMagicSize);
  out.push_back(static_cast<char>(v1 ? 1 : 2));
  out.push_back(0);
  out.push_back(static_cast<char>(header_len & 0xff));
  out.push_back(static_cast<char>((header_len >> 8) & 0xff));
  if (!v1) {
    out.push_back(static_cast<char>((header_len >> 16) & 0xff));
    out.push_back(static_cast<char>((header_len >> 24) & 0xff));
  }
  out += dict;
  out.append(pad, ' ');
  out.push_back('\n');
  if (tensor.dtype() == DataType::kString) {
    out += string_bytes;
  } else if (tensor.dtype() == DataType::kBool) {
    for (int64_t i = 0; i < tensor.num_elements(); ++i)
      out.push_back(tensor.data<uint8_t>()[i] != 0 ? 1 : 0);
  } else {
    out.append(static_cast<const char*>(tensor.raw_data()), tensor.byte_size());
  }
  return out;
}

Status WriteNpyFile(const Tensor& tensor, const std::string& path) {
  NEE_ASSIGN_OR_RETURN(std::string bytes, SerializeNpy(tensor));
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return IoError("cannot create '" + path + "': " + std::strerror(errno));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) return IoError("cannot write '" + path + "'");
  return Status::Ok();
}

}  // namespace nee
