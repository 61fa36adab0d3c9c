#include "base/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace nee {

Json Json::Bool(bool b) {
  Json j;
  j.kind_ = Kind::kBool;
  j.bool_ = b;
  return j;
}
Json Json::Number(double n) {
  Json j;
  j.kind_ = Kind::kNumber;
  j.number_ = n;
  return j;
}
Json Json::String(std::string s) {
  Json j;
  j.kind_ = Kind::kString;
  j.string_ = std::move(s);
  return j;
}
Json Json::Array() {
  Json j;
  j.kind_ = Kind::kArray;
  return j;
}
Json Json::Object() {
  Json j;
  j.kind_ = Kind::kObject;
  return j;
}

Json& Json::Set(const std::string& key, Json value) {
  for (auto& member : members_)
    if (member.first == key) {
      member.second = std::move(value);
      return *this;
    }
  members_.emplace_back(key, std::move(value));
  return *this;
}

Json& Json::Push(Json value) {
  items_.push_back(std::move(value));
  return *this;
}

const Json* Json::Find(const std::string& key) const {
  for (const auto& member : members_)
    if (member.first == key) return &member.second;
  return nullptr;
}

std::string Json::StringAt(const std::string& key) const {
  const Json* value = Find(key);
  return value && value->is_string() ? value->string() : std::string();
}

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not one.
size_t Utf8SequenceLength(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  size_t length;
  uint32_t min;
  uint32_t code;
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) length = 2, min = 0x80, code = lead & 0x1f;
  else if ((lead & 0xf0) == 0xe0) length = 3, min = 0x800, code = lead & 0x0f;
  else if ((lead & 0xf8) == 0xf0) length = 4, min = 0x10000, code = lead & 0x07;
  else return 0;
  if (i + length > s.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3f);
  }
  if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return length;
}

void AppendUtf8(std::string& out, uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xc0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xe0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  }
}

void Newline(std::string& out, int indent, int depth) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<size_t>(indent * depth), ' ');
}

}  // namespace

std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (c >= 0x80) {
      const size_t length = Utf8SequenceLength(s, i);
      if (length == 0) {
        out += "\xef\xbf\xbd";  // U+FFFD for a byte that is not UTF-8
        ++i;
      } else {
        out.append(s, i, length);
        i += length;
      }
      continue;
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out + "\"";
}

void Json::Write(std::string& out, int indent, int depth) const {
  switch (kind_) {
    case Kind::kNull: out += "null"; break;
    case Kind::kBool: out += bool_ ? "true" : "false"; break;
    case Kind::kNumber: {
      char buf[32];
      if (!std::isfinite(number_)) std::snprintf(buf, sizeof buf, "null");
      else if (number_ == std::floor(number_) && std::fabs(number_) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", number_);
      else std::snprintf(buf, sizeof buf, "%.17g", number_);
      out += buf;
      break;
    }
    case Kind::kString: out += JsonQuote(string_); break;
    case Kind::kArray:
      out += '[';
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i) out += ',';
        Newline(out, indent, depth + 1);
        items_[i].Write(out, indent, depth + 1);
      }
      if (!items_.empty()) Newline(out, indent, depth);
      out += ']';
      break;
    case Kind::kObject:
      out += '{';
      for (size_t i = 0; i < members_.size(); ++i) {
        if (i) out += ',';
        Newline(out, indent, depth + 1);
        out += JsonQuote(members_[i].first);
        out += indent < 0 ? ":" : ": ";
        members_[i].second.Write(out, indent, depth + 1);
      }
      if (!members_.empty()) Newline(out, indent, depth);
      out += '}';
      break;
  }
}

std::string Json::Serialize(int indent) const {
  std::string out;
  Write(out, indent, 0);
  return out;
}

namespace {

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : s_(text) {}

  Result<Json> ParseDocument() {
    Json value;
    NEE_RETURN_IF_ERROR(Value(value, 0));
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected text after the JSON value");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 64;

  Status Error(const std::string& what) const {
    return InvalidArgument("invalid JSON: " + what + " at byte " + std::to_string(pos_));
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool Consume(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }

  Status Value(Json& out, int depth) {
    if (depth > kMaxDepth) return Error("nesting deeper than 64");
    SkipSpace();
    if (pos_ >= s_.size()) return Error("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return ObjectValue(out, depth);
    if (c == '[') return ArrayValue(out, depth);
    if (c == '"') {
      std::string text;
      NEE_RETURN_IF_ERROR(StringValue(text));
      out = Json::String(std::move(text));
      return Status::Ok();
    }
    if (Consume("true")) return out = Json::Bool(true), Status::Ok();
    if (Consume("false")) return out = Json::Bool(false), Status::Ok();
    if (Consume("null")) return out = Json(), Status::Ok();
    return NumberValue(out);
  }

  // The elements of an object or array after its opening bracket: `element`
  // separated by ',' up to `close`.
  template <typename Element>
  Status Elements(char close, Element element) {
    ++pos_;  // the opening bracket
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == close) return ++pos_, Status::Ok();
    for (;;) {
      NEE_RETURN_IF_ERROR(element());
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == close) return ++pos_, Status::Ok();
      return Error(std::string("expected ',' or '") + close + "'");
    }
  }

  Status ObjectValue(Json& out, int depth) {
    out = Json::Object();
    return Elements('}', [&]() -> Status {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Error("expected a member name");
      std::string key;
      NEE_RETURN_IF_ERROR(StringValue(key));
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      Json value;
      NEE_RETURN_IF_ERROR(Value(value, depth + 1));
      out.Set(key, std::move(value));
      return Status::Ok();
    });
  }

  Status ArrayValue(Json& out, int depth) {
    out = Json::Array();
    return Elements(']', [&]() -> Status {
      Json value;
      NEE_RETURN_IF_ERROR(Value(value, depth + 1));
      out.Push(std::move(value));
      return Status::Ok();
    });
  }

  Status Hex4(uint32_t& code) {
    if (pos_ + 4 > s_.size()) return Error("truncated \\u escape");
    code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      uint32_t digit;
      if (h >= '0' && h <= '9') digit = static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') digit = static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') digit = static_cast<uint32_t>(h - 'A' + 10);
      else return Error("bad hex digit in \\u escape");
      code = code * 16 + digit;
    }
    return Status::Ok();
  }

  Status StringValue(std::string& out) {
    ++pos_;  // '"'
    for (;;) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') return ++pos_, Status::Ok();
      if (c < 0x20) return Error("control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      if (++pos_ >= s_.size()) return Error("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t code = 0;
          NEE_RETURN_IF_ERROR(Hex4(code));
          if (code >= 0xd800 && code <= 0xdbff) {
            uint32_t low = 0;
            if (!Consume("\\u")) return Error("lone high surrogate");
            NEE_RETURN_IF_ERROR(Hex4(low));
            if (low < 0xdc00 || low > 0xdfff) return Error("bad low surrogate");
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
          } else if (code >= 0xdc00 && code <= 0xdfff) {
            return Error("lone low surrogate");
          }
          AppendUtf8(out, code);
          break;
        }
        default: return Error("unknown escape");
      }
    }
  }

  Status NumberValue(Json& out) {
    const size_t start = pos_;
    auto digits = [&] {
      size_t first = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ > first;
    };
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') ++pos_;
    else if (!digits()) return Error("unexpected character");
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (!digits()) return Error("digits expected after '.'");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) return Error("digits expected in the exponent");
    }
    out = Json::Number(std::strtod(s_.substr(start, pos_ - start).c_str(), nullptr));
    return Status::Ok();
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

Result<Json> Json::Parse(const std::string& text) { return JsonParser(text).ParseDocument(); }

}  // namespace nee
