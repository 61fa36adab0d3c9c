// Operator family: string ops.
//
//   StringNormalizer (10): drops stopwords from a [C] or [1, C] tensor, then
//       lower- or upper-cases the rest.
//   StringSplit (20): splits every element on a delimiter (or on runs of
//       whitespace), padding the rows with "" to equal length.
//   StringConcat (20): elementwise concatenation with broadcasting.
//   RegexFullMatch (20): whether each element fully matches an RE2 pattern.
//   TfIdfVectorizer (9): n-gram (with skips) counts, TF / IDF / TFIDF weighted.
//   com.microsoft Tokenizer (1): ONNX Runtime's tokenizer (separators, a token pattern
//       or characters), as exported by skl2onnx for CountVectorizer / TfidfVectorizer.
//
// Case mapping covers ASCII, Latin-1, Greek and Cyrillic letters in UTF-8.
// RegexFullMatch runs std::regex (ECMAScript) on the subset of RE2 syntax
// where both agree on ASCII text; other patterns or inputs are reported as
// NotImplemented rather than matched with different semantics.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

Status RequireStrings(const KernelContext& ctx, size_t i, const Tensor& t) {
  if (t.dtype() == DataType::kString) return Status::Ok();
  return ctx.InputError(i, "must be a string tensor, got " + t.Describe());
}

// ---- Case mapping on UTF-8 ----------------------------------------------------------

// Decodes the code point at s[i] (advancing i); invalid bytes decode as themselves.
uint32_t DecodeUtf8(const std::string& s, size_t& i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) { return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80; };
  if (c >= 0xC0 && c < 0xE0 && cont(1)) {
    uint32_t cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
    i += 2;
    return cp;
  }
  if (c >= 0xE0 && c < 0xF0 && cont(1) && cont(2)) {
    uint32_t cp = ((c & 0x0Fu) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
                  (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
    i += 3;
    return cp;
  }
  i += 1;
  return c;  // ASCII, or a byte passed through unchanged
}

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t ToLower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) || (c >= 0x410 && c <= 0x42F))
    return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

uint32_t ToUpper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) || (c >= 0x430 && c <= 0x44F))
    return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

std::string ChangeCase(const std::string& s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const uint32_t cp = DecodeUtf8(s, i);
    const uint32_t mapped = upper ? ToUpper(cp) : ToLower(cp);
    if (mapped == cp) out.append(s, start, i - start);  // keeps undecodable bytes as they were
    else AppendUtf8(mapped, out);
  }
  return out;
}

// ---- StringNormalizer -------------------------------------------------------------

enum class CaseChange { kNone, kLower, kUpper };

Result<CaseChange> ReadCaseChange(const Node& node) {
  NEE_ASSIGN_OR_RETURN(std::string action, node.GetString("case_change_action", "NONE"));
  if (action == "NONE") return CaseChange::kNone;
  if (action == "LOWER") return CaseChange::kLower;
  if (action == "UPPER") return CaseChange::kUpper;
  return InvalidModel(node.Describe() + ": case_change_action must be NONE, LOWER or UPPER, got '" + action + "'");
}

Status StringNormalizerInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_RETURN_IF_ERROR(ReadCaseChange(ctx.node).status());
  std::optional<Shape> y;
  if (x->shape) {
    if (x->shape->size() != 1 && x->shape->size() != 2)
      return ctx.InputError(0, "must have shape [C] or [1, C], got " + ShapeToString(*x->shape));
    // Stopword removal makes the element count data-dependent.
    y = x->shape->size() == 1 ? Shape{Dim::Unknown()} : Shape{Dim::Known(1), Dim::Unknown()};
  }
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kString, y);
  return Status::Ok();
}

Status StringNormalizerKernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireStrings(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(CaseChange action, ReadCaseChange(node));
  NEE_ASSIGN_OR_RETURN(int64_t case_sensitive, node.GetInt("is_case_sensitive", 0));
  NEE_ASSIGN_OR_RETURN(std::vector<std::string> stopwords, node.GetStrings("stopwords", {}));
  if (x->rank() != 1 && !(x->rank() == 2 && x->dim(0) == 1))
    return ctx.InputError(0, "must have shape [C] or [1, C], got " + DimsToString(x->dims()));
  // Case-insensitive comparison compares lower-cased forms.
  auto key = [&](const std::string& s) { return case_sensitive ? s : ChangeCase(s, false); };
  std::vector<std::string> stops;
  for (const std::string& s : stopwords) stops.push_back(key(s));
  std::sort(stops.begin(), stops.end());
  std::vector<std::string> kept;
  for (const std::string& s : x->span<std::string>()) {
    if (std::binary_search(stops.begin(), stops.end(), key(s))) continue;
    kept.push_back(action == CaseChange::kNone ? s : ChangeCase(s, action == CaseChange::kUpper));
  }
  // Nothing left: a single empty string, keeping the input's rank.
  if (kept.empty()) kept.push_back("");
  const int64_t count = static_cast<int64_t>(kept.size());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kString,
                                                    x->rank() == 1 ? std::vector<int64_t>{count} : std::vector<int64_t>{1, count}));
  std::move(kept.begin(), kept.end(), y.data<std::string>());
  return Status::Ok();
}

// ---- StringSplit --------------------------------------------------------------------

bool IsSplitSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Python's str.split(delimiter, maxsplit) (maxsplit < 0: no limit); an empty
// delimiter splits on whitespace runs, dropping leading and trailing whitespace.
std::vector<std::string> SplitString(const std::string& s, const std::string& delimiter, int64_t maxsplit) {
  std::vector<std::string> parts;
  int64_t splits = 0;
  if (!delimiter.empty()) {
    size_t start = 0;
    while (maxsplit < 0 || splits < maxsplit) {
      const size_t at = s.find(delimiter, start);
      if (at == std::string::npos) break;
      parts.push_back(s.substr(start, at - start));
      start = at + delimiter.size();
      ++splits;
    }
    parts.push_back(s.substr(start));
    return parts;
  }
  size_t i = 0;
  while (true) {
    while (i < s.size() && IsSplitSpace(s[i])) ++i;
    if (i == s.size()) break;
    if (maxsplit >= 0 && splits >= maxsplit) {
      // The unsplit rest keeps its trailing whitespace, as in Python.
      parts.push_back(s.substr(i));
      break;
    }
    size_t j = i;
    while (j < s.size() && !IsSplitSpace(s[j])) ++j;
    parts.push_back(s.substr(i, j - i));
    ++splits;
    i = j;
  }
  return parts;
}

Status StringSplitInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  std::optional<Shape> y;
  if (x->shape) {
    y = *x->shape;
    y->push_back(Dim::Unknown());
  }
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kString, y);
  if (ctx.num_outputs() > 1) ctx.output_types[1] = TypeInfo::Tensor(DataType::kInt64, x->shape);
  return Status::Ok();
}

Status StringSplitKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireStrings(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(std::string delimiter, ctx.node().GetString("delimiter", ""));
  NEE_ASSIGN_OR_RETURN(int64_t maxsplit, ctx.node().GetInt("maxsplit", -1));
  std::vector<std::vector<std::string>> parts(static_cast<size_t>(x->num_elements()));
  int64_t widest = 0;
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    parts[static_cast<size_t>(i)] = SplitString(x->data<std::string>()[i], delimiter, maxsplit);
    widest = std::max(widest, static_cast<int64_t>(parts[static_cast<size_t>(i)].size()));
  }
  std::vector<int64_t> y_dims = x->dims();
  y_dims.push_back(widest);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kString, y_dims));
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    auto& row = parts[static_cast<size_t>(i)];
    std::string* out = y.data<std::string>() + i * widest;
    for (int64_t k = 0; k < widest; ++k)
      out[k] = k < static_cast<int64_t>(row.size()) ? std::move(row[static_cast<size_t>(k)]) : std::string();
  }
  if (ctx.wants_output(1)) {
    NEE_ASSIGN_OR_RETURN(Tensor z, ctx.AllocateOutput(1, DataType::kInt64, x->dims()));
    // The rows keep their sizes after their strings were moved out.
    for (int64_t i = 0; i < x->num_elements(); ++i)
      z.data<int64_t>()[i] = static_cast<int64_t>(parts[static_cast<size_t>(i)].size());
  }
  return Status::Ok();
}

// ---- StringConcat -------------------------------------------------------------------

Status StringConcatInfer(InferenceContext& ctx) {
  NEE_RETURN_IF_ERROR(InferBroadcast(ctx));
  ctx.output_types[0].elem_type = DataType::kString;
  return Status::Ok();
}

Status StringConcatKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  NEE_RETURN_IF_ERROR(RequireStrings(ctx, 0, *a));
  NEE_RETURN_IF_ERROR(RequireStrings(ctx, 1, *b));
  auto dims = BroadcastDims(a->dims(), b->dims());
  if (!dims.ok()) return ctx.InputError(1, dims.status().message());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kString, dims.value()));
  const std::string* pa = a->data<std::string>();
  const std::string* pb = b->data<std::string>();
  std::string* py = y.data<std::string>();
  ForEachBroadcastBlock(dims.value(), {a->dims(), b->dims()},
                        [&](int64_t out, const int64_t* in, const int64_t* step, int64_t count) {
                          for (int64_t k = 0; k < count; ++k) py[out + k] = pa[in[0] + k * step[0]] + pb[in[1] + k * step[1]];
                        });
  return Status::Ok();
}

// ---- RegexFullMatch -------------------------------------------------------------------

// Longest input std::regex is run on: libstdc++'s matcher recurses per
// character, so very long inputs could exhaust the stack.
constexpr size_t kMaxRegexInput = 4096;

// Element i, about to go through std::regex for `use` (e.g. "matching"), must
// be ASCII (std::regex works on bytes) and at most kMaxRegexInput long.
Status CheckRegexSubject(const Node& node, int64_t i, const std::string& s, const char* use) {
  if (s.size() > kMaxRegexInput)
    return NotImplemented(node.Describe() + ": element " + std::to_string(i) + " is longer than " +
                          std::to_string(kMaxRegexInput) + " bytes");
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80)
      return NotImplemented(node.Describe() + ": element " + std::to_string(i) + " is not ASCII; UTF-8 " + use +
                            " is not supported");
  return Status::Ok();
}

// Checks that `pattern` only uses syntax where RE2 and ECMAScript agree;
// returns the reason when it does not.
std::optional<std::string> UnsupportedRegexSyntax(const std::string& pattern) {
  for (size_t i = 0; i < pattern.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(pattern[i]);
    if (c >= 0x80) return "non-ASCII characters";
    if (c == '(' && i + 1 < pattern.size() && pattern[i + 1] == '?') {
      if (i + 2 < pattern.size() && pattern[i + 2] == ':') continue;  // non-capturing group: same in both
      return "'(?' groups (flags, named groups or lookaround)";
    }
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      // Escapes with the same meaning in both grammars.
      static const std::string kSame = "dDwWsSbBtnrfv.\\*+?()[]{}|^$-/";
      if (kSame.find(e) != std::string::npos) continue;
      return std::string("the escape \\") + e;
    }
  }
  return std::nullopt;
}

Status RegexFullMatchInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kBool, x->shape);
  return Status::Ok();
}

Status RegexFullMatchKernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireStrings(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(std::string pattern, node.GetString("pattern"));
  if (auto reason = UnsupportedRegexSyntax(pattern))
    return NotImplemented(node.Describe() + ": pattern '" + pattern + "' uses " + *reason +
                          ", which nee's regex engine does not match with RE2 semantics");
  std::regex re;
  try {
    re = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::exception& e) {
    return InvalidModel(node.Describe() + ": invalid pattern '" + pattern + "': " + e.what());
  }
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kBool, x->dims()));
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const std::string& s = x->data<std::string>()[i];
    NEE_RETURN_IF_ERROR(CheckRegexSubject(node, i, s, "matching"));
    try {
      y.data<bool>()[i] = std::regex_match(s, re);
    } catch (const std::exception& e) {
      return RuntimeError(node.Describe() + ": matching element " + std::to_string(i) + " failed: " + e.what());
    }
  }
  return Status::Ok();
}

// ---- com.microsoft Tokenizer ------------------------------------------------------------
//
// ONNX Runtime's contrib op that scikit-learn's CountVectorizer / TfidfVectorizer export
// (skl2onnx) puts before TfIdfVectorizer. Each element of a [C] or [N, C] string tensor
// becomes a row of tokens, padded with pad_value to the longest row: Y has X's shape plus
// one axis. Tokens are found one of three ways:
//   separators [""] or tokenexp ".": every UTF-8 character is a token;
//   separators: each separator (an RE2 pattern) in turn splits every token so far;
//   tokenexp: the successive matches of one RE2 pattern are the tokens.
// Tokens shorter than mincharnum characters are dropped. mark=1 adds a start (0x02) and an
// end (0x03) token around each row's tokens. No token anywhere: the new axis has length 0.
// ONNX Runtime matches RE2 leftmost-longest; nee uses std::regex (leftmost-first), so
// patterns where the two can differ (alternation, lazy quantifiers) and non-ASCII text
// outside the character mode are reported as NotImplemented.

struct TokenizerConfig {
  bool mark = false;
  std::string pad_value;
  int64_t mincharnum = 1;
  bool char_mode = false;
  std::vector<std::regex> separators;  // empty with tokenexp
  std::optional<std::regex> tokenexp;
};

// Turns an RE2 pattern into an ECMAScript one with the same matches on ASCII text, or
// says why it cannot. Escaped punctuation (\! \@ ...) is literal in both grammars but
// libstdc++ rejects some of it, so it is rewritten as a hex escape.
Result<std::string> TokenizerPattern(const Node& node, const std::string& pattern) {
  std::string checked, converted;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size() && std::ispunct(static_cast<unsigned char>(pattern[i + 1]))) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned>(static_cast<unsigned char>(pattern[++i])));
      converted += hex;
      checked += 'x';
      continue;
    }
    if (c == '|') return NotImplemented(node.Describe() + ": pattern '" + pattern + "' has an alternation, which RE2's leftmost-longest matching may resolve differently");
    if ((c == '?' || c == '+' || c == '*' || c == '}') && i + 1 < pattern.size() && pattern[i + 1] == '?' &&
        !(i > 0 && pattern[i - 1] == '\\'))
      return NotImplemented(node.Describe() + ": pattern '" + pattern + "' has a lazy quantifier, which RE2's leftmost-longest matching ignores");
    checked += c;
    converted += c;
  }
  if (auto reason = UnsupportedRegexSyntax(checked))
    return NotImplemented(node.Describe() + ": pattern '" + pattern + "' uses " + *reason +
                          ", which nee's regex engine does not match with RE2 semantics");
  return converted;
}

Result<std::regex> CompileTokenizerPattern(const Node& node, const std::string& pattern) {
  NEE_ASSIGN_OR_RETURN(std::string converted, TokenizerPattern(node, pattern));
  try {
    return std::regex(converted, std::regex::ECMAScript);
  } catch (const std::exception& e) {
    return InvalidModel(node.Describe() + ": invalid pattern '" + pattern + "': " + e.what());
  }
}

Result<TokenizerConfig> ReadTokenizerConfig(const Node& node) {
  TokenizerConfig c;
  NEE_ASSIGN_OR_RETURN(int64_t mark, node.GetInt("mark", 0));
  c.mark = mark != 0;
  NEE_ASSIGN_OR_RETURN(c.pad_value, node.GetString("pad_value", "#"));
  NEE_ASSIGN_OR_RETURN(c.mincharnum, node.GetInt("mincharnum", 1));
  if (c.mincharnum < 1)
    return InvalidModel(node.Describe() + ": mincharnum must be positive, got " + std::to_string(c.mincharnum));
  if (node.HasAttr("separators")) {
    NEE_ASSIGN_OR_RETURN(std::vector<std::string> separators, node.GetStrings("separators"));
    if (separators.empty()) return InvalidModel(node.Describe() + ": separators must not be empty");
    c.char_mode = separators.size() == 1 && separators[0].empty();
    if (!c.char_mode) {
      for (const std::string& sep : separators) {
        if (sep.empty()) return InvalidModel(node.Describe() + ": an empty separator needs to be the only one");
        NEE_ASSIGN_OR_RETURN(std::regex re, CompileTokenizerPattern(node, sep));
        c.separators.push_back(std::move(re));
      }
    }
  } else {
    if (!node.HasAttr("tokenexp"))
      return InvalidModel(node.Describe() + ": needs either 'separators' or 'tokenexp'");
    NEE_ASSIGN_OR_RETURN(std::string tokenexp, node.GetString("tokenexp"));
    if (tokenexp.empty()) return InvalidModel(node.Describe() + ": tokenexp must not be empty");
    c.char_mode = tokenexp == ".";
    if (!c.char_mode) {
      NEE_ASSIGN_OR_RETURN(std::regex re, CompileTokenizerPattern(node, tokenexp));
      c.tokenexp = std::move(re);
    }
  }
  if (c.char_mode && c.mincharnum > 1)
    return InvalidModel(node.Describe() + ": mincharnum " + std::to_string(c.mincharnum) +
                        " is too big for character tokenization");
  return c;
}

Status TokenizerInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  std::optional<Shape> y;
  if (x->shape) {
    if (x->shape->size() != 1 && x->shape->size() != 2)
      return ctx.InputError(0, "must have shape [C] or [N, C], got " + ShapeToString(*x->shape));
    y = *x->shape;
    y->push_back(Dim::Unknown());  // the longest row's token count
  }
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kString, y);
  return Status::Ok();
}

// Byte length of the UTF-8 character starting with byte c (1 for stray bytes).
size_t Utf8CharBytes(unsigned char c) {
  if (c >= 0xF0 && c < 0xF8) return 4;
  if (c >= 0xE0) return c < 0xF0 ? 3 : 1;
  if (c >= 0xC0) return 2;
  return 1;
}

// The regex search from byte `from` of s; \b and ^ see the text before `from`.
bool SearchFrom(const std::string& s, size_t from, const std::regex& re, size_t& pos, size_t& len) {
  std::smatch m;
  auto flags = from > 0 ? std::regex_constants::match_prev_avail : std::regex_constants::match_default;
  if (!std::regex_search(s.begin() + static_cast<std::ptrdiff_t>(from), s.end(), m, re, flags)) return false;
  pos = from + static_cast<size_t>(m.position(0));
  len = static_cast<size_t>(m.length(0));
  return true;
}

std::vector<std::string> SplitOnSeparator(const std::vector<std::string>& tokens, const std::regex& sep,
                                          size_t mincharnum) {
  std::vector<std::string> out;
  for (const std::string& text : tokens) {
    size_t start = 0, pos = 0, len = 0;
    while (start <= text.size() && SearchFrom(text, start, sep, pos, len)) {
      if (pos - start >= mincharnum) out.push_back(text.substr(start, pos - start));
      // An empty match skips one character, as ONNX Runtime does.
      start = len > 0 ? pos + len : pos + (pos < text.size() ? Utf8CharBytes(text[pos]) : 1);
    }
    if (start < text.size() && text.size() - start >= mincharnum) out.push_back(text.substr(start));
  }
  return out;
}

std::vector<std::string> MatchTokens(const std::string& text, const std::regex& re, size_t mincharnum) {
  std::vector<std::string> out;
  size_t start = 0, pos = 0, len = 0;
  while (start <= text.size() && SearchFrom(text, start, re, pos, len)) {
    if (len >= mincharnum) {
      out.push_back(text.substr(pos, len));
      start = pos + len;
    } else {
      start = pos + (pos < text.size() ? Utf8CharBytes(text[pos]) : 1);
    }
  }
  return out;
}

Status TokenizerKernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireStrings(ctx, 0, *x));
  if (x->rank() != 1 && x->rank() != 2)
    return ctx.InputError(0, "must have shape [C] or [N, C], got " + DimsToString(x->dims()));
  NEE_ASSIGN_OR_RETURN(TokenizerConfig config, ReadTokenizerConfig(node));
  const size_t mincharnum = static_cast<size_t>(config.mincharnum);
  std::vector<std::vector<std::string>> rows(static_cast<size_t>(x->num_elements()));
  size_t widest = 0;
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const std::string& s = x->data<std::string>()[i];
    auto& row = rows[static_cast<size_t>(i)];
    if (config.char_mode) {
      for (size_t k = 0; k < s.size();) {
        const size_t n = std::min(Utf8CharBytes(static_cast<unsigned char>(s[k])), s.size() - k);
        row.push_back(s.substr(k, n));
        k += n;
      }
    } else {
      NEE_RETURN_IF_ERROR(CheckRegexSubject(node, i, s, "tokenization with patterns"));
      try {
        if (config.tokenexp) {
          row = MatchTokens(s, *config.tokenexp, mincharnum);
        } else {
          row = {s};
          for (const std::regex& sep : config.separators) row = SplitOnSeparator(row, sep, mincharnum);
        }
      } catch (const std::exception& e) {
        return RuntimeError(node.Describe() + ": tokenizing element " + std::to_string(i) + " failed: " + e.what());
      }
    }
    widest = std::max(widest, row.size());
  }
  const size_t width = widest == 0 ? 0 : widest + (config.mark ? 2 : 0);
  std::vector<int64_t> y_dims = x->dims();
  y_dims.push_back(static_cast<int64_t>(width));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kString, y_dims));
  if (width == 0) return Status::Ok();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string* out = y.data<std::string>() + i * width;
    size_t k = 0;
    if (config.mark) out[k++] = std::string(1, '\x02');
    for (std::string& token : rows[i]) out[k++] = std::move(token);
    if (config.mark) out[k++] = std::string(1, '\x03');
    while (k < width) out[k++] = config.pad_value;
  }
  return Status::Ok();
}

// ---- TfIdfVectorizer --------------------------------------------------------------------

struct TfIdfConfig {
  enum class Mode { kTf, kIdf, kTfIdf } mode = Mode::kTf;
  int64_t min_gram = 1, max_gram = 1, max_skip = 0;
  std::vector<int64_t> ngram_counts, ngram_indexes, pool_ints;
  std::vector<std::string> pool_strings;
  std::vector<float> weights;
  int64_t output_size = 0;
};

Result<TfIdfConfig> ReadTfIdfConfig(const Node& node) {
  TfIdfConfig c;
  const std::string where = node.Describe() + ": ";
  NEE_ASSIGN_OR_RETURN(std::string mode, node.GetString("mode"));
  if (mode == "TF") c.mode = TfIdfConfig::Mode::kTf;
  else if (mode == "IDF") c.mode = TfIdfConfig::Mode::kIdf;
  else if (mode == "TFIDF") c.mode = TfIdfConfig::Mode::kTfIdf;
  else return InvalidModel(where + "mode must be TF, IDF or TFIDF, got '" + mode + "'");
  NEE_ASSIGN_OR_RETURN(c.min_gram, node.GetInt("min_gram_length"));
  NEE_ASSIGN_OR_RETURN(c.max_gram, node.GetInt("max_gram_length"));
  NEE_ASSIGN_OR_RETURN(c.max_skip, node.GetInt("max_skip_count"));
  NEE_ASSIGN_OR_RETURN(c.ngram_counts, node.GetInts("ngram_counts"));
  NEE_ASSIGN_OR_RETURN(c.ngram_indexes, node.GetInts("ngram_indexes"));
  NEE_ASSIGN_OR_RETURN(c.pool_ints, node.GetInts("pool_int64s", {}));
  NEE_ASSIGN_OR_RETURN(c.pool_strings, node.GetStrings("pool_strings", {}));
  NEE_ASSIGN_OR_RETURN(c.weights, node.GetFloats("weights", {}));
  if (c.min_gram < 1 || c.max_gram < c.min_gram)
    return InvalidModel(where + "need 1 <= min_gram_length <= max_gram_length");
  if (c.max_skip < 0 || c.max_skip > (int64_t{1} << 20)) return InvalidModel(where + "max_skip_count out of range");
  if (!c.pool_ints.empty() && !c.pool_strings.empty())
    return InvalidModel(where + "only one of pool_int64s and pool_strings may be set");
  const int64_t pool = static_cast<int64_t>(std::max(c.pool_ints.size(), c.pool_strings.size()));
  for (size_t i = 0; i < c.ngram_counts.size(); ++i)
    if (c.ngram_counts[i] < 0 || c.ngram_counts[i] > pool || (i > 0 && c.ngram_counts[i] < c.ngram_counts[i - 1]))
      return InvalidModel(where + "ngram_counts must be non-decreasing offsets into the pool");
  for (int64_t v : c.ngram_indexes) {
    if (v < 0) return InvalidModel(where + "ngram_indexes must be non-negative");
    c.output_size = std::max(c.output_size, v + 1);
  }
  if (!c.weights.empty() && static_cast<int64_t>(c.weights.size()) < c.output_size)
    return InvalidModel(where + "weights has " + std::to_string(c.weights.size()) + " values, expected " +
                        std::to_string(c.output_size));
  return c;
}

Status TfIdfVectorizerInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(TfIdfConfig c, ReadTfIdfConfig(ctx.node));
  std::optional<Shape> y;
  if (x->shape) {
    if (x->shape->size() > 2) return ctx.InputError(0, "must have shape [C] or [N, C], got " + ShapeToString(*x->shape));
    y = x->shape->size() == 2 ? Shape{(*x->shape)[0], Dim::Known(c.output_size)} : Shape{Dim::Known(c.output_size)};
  }
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, y);
  return Status::Ok();
}

// Counts the pool's n-grams in each row of `tokens` ([rows, cols]).
template <typename Key>
Status CountNgrams(KernelContext& ctx, const TfIdfConfig& c, const std::vector<Key>& pool,
                   const std::vector<Key>& tokens, int64_t rows, int64_t cols, std::vector<int64_t>& counts) {
  // n-gram -> its ordinal in the pool (ordinals count every n-gram, also
  // those of lengths outside [min, max], as the attribute layout implies).
  std::map<std::vector<Key>, int64_t> ids;
  int64_t ordinal = 0;
  for (size_t i = 0; i < c.ngram_counts.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) + 1;
    const int64_t begin = c.ngram_counts[i];
    const int64_t end = i + 1 < c.ngram_counts.size() ? c.ngram_counts[i + 1] : static_cast<int64_t>(pool.size());
    for (int64_t at = begin; at + n <= end; at += n, ++ordinal)
      if (n >= c.min_gram && n <= c.max_gram) ids[std::vector<Key>(pool.begin() + at, pool.begin() + at + n)] = ordinal;
  }
  for (const auto& [gram, id] : ids)
    if (id >= static_cast<int64_t>(c.ngram_indexes.size()))
      return InvalidModel(ctx.node().Describe() + ": the pool holds more n-grams than ngram_indexes has entries (" +
                          std::to_string(c.ngram_indexes.size()) + ")");
  std::vector<Key> gram;
  for (int64_t r = 0; r < rows; ++r) {
    const Key* row = tokens.data() + r * cols;
    int64_t shortest = c.min_gram;
    for (int64_t skip = 1; skip <= c.max_skip + 1; ++skip) {
      for (int64_t start = 0; start < cols; ++start) {
        gram.clear();
        for (int64_t n = 1; n <= c.max_gram; ++n) {
          const int64_t at = start + (n - 1) * skip;
          if (at >= cols) break;
          gram.push_back(row[at]);
          if (n < shortest) continue;
          auto it = ids.find(gram);
          if (it != ids.end()) ++counts[static_cast<size_t>(r * c.output_size + c.ngram_indexes[it->second])];
        }
      }
      // Unigrams do not depend on the skip: count them only once.
      if (shortest == 1) ++shortest;
      if (shortest > c.max_gram) break;
    }
  }
  return Status::Ok();
}

Status TfIdfVectorizerKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(TfIdfConfig c, ReadTfIdfConfig(ctx.node()));
  if (x->rank() > 2) return ctx.InputError(0, "must have shape [C] or [N, C], got " + DimsToString(x->dims()));
  const int64_t rows = x->rank() == 2 ? x->dim(0) : 1;
  const int64_t cols = x->rank() == 0 ? 1 : x->dims().back();
  std::vector<int64_t> y_dims = x->rank() == 2 ? std::vector<int64_t>{rows, c.output_size} : std::vector<int64_t>{c.output_size};
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat, y_dims));
  std::vector<int64_t> counts(static_cast<size_t>(y.num_elements()), 0);
  if (x->dtype() == DataType::kString) {
    if (!c.pool_ints.empty()) return ctx.InputError(0, "is a string tensor but the pool is pool_int64s");
    std::vector<std::string> tokens(x->span<std::string>().begin(), x->span<std::string>().end());
    NEE_RETURN_IF_ERROR(CountNgrams(ctx, c, c.pool_strings, tokens, rows, cols, counts));
  } else if (x->dtype() == DataType::kInt32 || x->dtype() == DataType::kInt64) {
    if (!c.pool_strings.empty()) return ctx.InputError(0, "is an integer tensor but the pool is pool_strings");
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> tokens, x->ToInt64Vector());
    NEE_RETURN_IF_ERROR(CountNgrams(ctx, c, c.pool_ints, tokens, rows, cols, counts));
  } else {
    return ctx.InputError(0, std::string("must be string, int32 or int64, got ") + DataTypeName(x->dtype()));
  }
  float* out = y.data<float>();
  for (size_t p = 0; p < counts.size(); ++p) {
    const size_t col = p % static_cast<size_t>(c.output_size);
    const float w = c.weights.empty() ? 1.0f : c.weights[col];
    switch (c.mode) {
      case TfIdfConfig::Mode::kTf: out[p] = static_cast<float>(counts[p]); break;
      case TfIdfConfig::Mode::kIdf: out[p] = counts[p] > 0 ? w : 0.0f; break;
      case TfIdfConfig::Mode::kTfIdf: out[p] = w * static_cast<float>(counts[p]); break;
    }
  }
  return Status::Ok();
}

}  // namespace

void RegisterTextOps(OpRegistry& registry) {
  registry.RegisterVersions("", "StringNormalizer", {10}, StringNormalizerInfer, StringNormalizerKernel);
  registry.RegisterVersions("", "StringSplit", {20}, StringSplitInfer, StringSplitKernel);
  registry.RegisterVersions("", "StringConcat", {20}, StringConcatInfer, StringConcatKernel);
  registry.RegisterVersions("", "RegexFullMatch", {20}, RegexFullMatchInfer, RegexFullMatchKernel);
  registry.RegisterVersions("", "TfIdfVectorizer", {9}, TfIdfVectorizerInfer, TfIdfVectorizerKernel);
  registry.RegisterVersions("com.microsoft", "Tokenizer", {1}, TokenizerInfer, TokenizerKernel);
}

}  // namespace nee
