// A small JSON value: built and serialized for the lineage records and the
// ML-BOM, parsed back from a model's metadata (which a file controls, so the
// parser is strict, bounds its nesting and never aborts).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace nee {

class Json {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Json() = default;  // null
  static Json Bool(bool b);
  static Json Number(double n);
  static Json String(std::string s);
  static Json Array();
  static Json Object();

  Kind kind() const { return kind_; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool boolean() const { return bool_; }
  double number() const { return number_; }
  const std::string& string() const { return string_; }
  // Array elements; object members in insertion order.
  const std::vector<Json>& items() const { return items_; }
  const std::vector<std::pair<std::string, Json>>& members() const { return members_; }

  // Object: sets `key` (replacing an earlier value in place). Returns *this.
  Json& Set(const std::string& key, Json value);
  Json& Set(const std::string& key, const std::string& value) { return Set(key, String(value)); }
  Json& Set(const std::string& key, const char* value) { return Set(key, String(value)); }
  // Array: appends. Returns *this.
  Json& Push(Json value);
  // Object member, or nullptr.
  const Json* Find(const std::string& key) const;
  // The member `key` if it is a string, else "".
  std::string StringAt(const std::string& key) const;

  // Compact with indent < 0; else one member per line, `indent` spaces a level.
  // Strings are written as UTF-8; bytes that are not valid UTF-8 become U+FFFD.
  std::string Serialize(int indent = -1) const;

  // RFC 8259 JSON (one value, surrounding whitespace allowed). Errors give
  // the byte offset; nesting deeper than 64 is refused.
  static Result<Json> Parse(const std::string& text);

 private:
  void Write(std::string& out, int indent, int depth) const;

  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Json> items_;
  std::vector<std::pair<std::string, Json>> members_;
};

// `s` as a JSON string literal, quotes included.
std::string JsonQuote(const std::string& s);

}  // namespace nee
