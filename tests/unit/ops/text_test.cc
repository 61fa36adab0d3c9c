// StringNormalizer, StringSplit, StringConcat, RegexFullMatch,
// TfIdfVectorizer and com.microsoft Tokenizer (expected values: ONNX Runtime
// 1.32's Tokenizer kernel, see the Tokenizer tests). Expected values come from misc_expected_gen.py (section
// "text"): onnx.reference for StringConcat and TfIdfVectorizer, Python's
// str.split / re.fullmatch / str.upper for the others (onnx.reference's
// StringNormalizer removes stopwords word by word, unlike the spec and the
// ONNX node tests, so Python's list filtering stands in for it).
#include "op_test_util.h"

namespace nee::testing {
namespace {

Value S(std::vector<std::string> values, std::vector<int64_t> dims) {
  return Value(Tensor::FromVector<std::string>(values, std::move(dims)));
}

template <typename T>
Value V(std::vector<T> values, std::vector<int64_t> dims) {
  return Value(Tensor::FromVector<T>(values, std::move(dims)));
}

std::vector<std::string> Strings(const Tensor& t) {
  return std::vector<std::string>(t.span<std::string>().begin(), t.span<std::string>().end());
}

void ExpectError(const Result<OpRun>& r, StatusCode code, const std::string& fragment) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

TEST(TextStringNormalizer, StopwordsAndCase) {
  auto r = RunOp(MakeNode("StringNormalizer", 1, 1,
                          {StringsAttr("stopwords", {"monday"}), StringAttr("case_change_action", "UPPER")}),
                 10, {S({"Monday", "tuesday", "MONDAY", "caf\xC3\xA9"}, {1, 4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outputs[0].tensor().dims(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Strings(r->outputs[0].tensor()), (std::vector<std::string>{"TUESDAY", "CAF\xC3\x89"}));
  // Case-sensitive: only the exact stopword goes; everything removed leaves [""].
  r = RunOp(MakeNode("StringNormalizer", 1, 1, {StringsAttr("stopwords", {"monday"}), IntAttr("is_case_sensitive", 1)}),
            10, {S({"Monday", "monday"}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Strings(r->outputs[0].tensor()), (std::vector<std::string>{"Monday"}));
  r = RunOp(MakeNode("StringNormalizer", 1, 1, {StringsAttr("stopwords", {"monday"})}), 10, {S({"monday"}, {1})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Strings(r->outputs[0].tensor()), (std::vector<std::string>{""}));
  ExpectError(RunOp(MakeNode("StringNormalizer", 1, 1), 10, {S({"a", "b"}, {2, 1})}), StatusCode::kInvalidArgument,
              "input 0");
}

TEST(TextStringSplit, WhitespaceMaxsplitAndDelimiter) {
  auto r = RunOp(MakeNode("StringSplit", 1, 2, {IntAttr("maxsplit", 1)}), 20,
                 {S({"  one two  three ", "a", "", "p  q"}, {2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outputs[0].tensor().dims(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(Strings(r->outputs[0].tensor()),
            (std::vector<std::string>{"one", "two  three ", "a", "", "", "", "p", "q"}));
  ExpectTensorNear<int64_t>(r->outputs[1].tensor(), {2, 2}, {2, 1, 0, 2});
  // With a delimiter, consecutive delimiters delimit empty strings.
  r = RunOp(MakeNode("StringSplit", 1, 2, {StringAttr("delimiter", "-")}), 20, {S({"o-n--x-"}, {1})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Strings(r->outputs[0].tensor()), (std::vector<std::string>{"o", "n", "", "x", ""}));
  ExpectTensorNear<int64_t>(r->outputs[1].tensor(), {1}, {5});
}

TEST(TextStringConcat, Broadcasts) {
  auto r = RunOp(MakeNode("StringConcat", 2, 1), 20, {S({"a", "b"}, {1, 2}), S({"x", "yz"}, {2, 1})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outputs[0].tensor().dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Strings(r->outputs[0].tensor()), (std::vector<std::string>{"ax", "bx", "ayz", "byz"}));
  ExpectError(RunOp(MakeNode("StringConcat", 2, 1), 20, {S({"a", "b"}, {2}), S({"x", "y", "z"}, {3})}),
              StatusCode::kInvalidModel, "broadcast");
}

TEST(TextRegexFullMatch, MatchesAndRefusesUnsupportedSyntax) {
  const std::string email = R"((\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$))";
  auto r = RunOp(MakeNode("RegexFullMatch", 1, 1, {StringAttr("pattern", email)}), 20,
                 {S({"account@gmail.com", "not email", " abc@yahoo.com!", "x@gmail.co"}, {2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<bool>(r->outputs[0].tensor(), {2, 2}, {true, false, true, false});
  // Lookahead is ECMAScript-only; RE2 flag groups are RE2-only: both are refused.
  ExpectError(RunOp(MakeNode("RegexFullMatch", 1, 1, {StringAttr("pattern", "a(?=b)b")}), 20, {S({"ab"}, {1})}),
              StatusCode::kNotImplemented, "pattern");
  ExpectError(RunOp(MakeNode("RegexFullMatch", 1, 1, {StringAttr("pattern", "(?i)ab")}), 20, {S({"AB"}, {1})}),
              StatusCode::kNotImplemented, "pattern");
  ExpectError(RunOp(MakeNode("RegexFullMatch", 1, 1, {StringAttr("pattern", "a(b")}), 20, {S({"ab"}, {1})}),
              StatusCode::kInvalidModel, "invalid pattern");
}

TEST(TextTfIdfVectorizer, CountsWithSkipsAndWeights) {
  Value x = V<int64_t>({1, 2, 3, 2, 3, 3, 3, 1, 2, 4}, {2, 5});
  std::vector<Attribute> attrs = {StringAttr("mode", "TF"), IntAttr("min_gram_length", 1), IntAttr("max_gram_length", 2),
                                  IntAttr("max_skip_count", 1), IntsAttr("ngram_counts", {0, 3}),
                                  IntsAttr("ngram_indexes", {0, 1, 2, 3, 4}), IntsAttr("pool_int64s", {1, 2, 3, 2, 3, 3, 1})};
  auto r = RunOp(MakeNode("TfIdfVectorizer", 1, 1, attrs), 9, {x});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 5}, {1, 2, 2, 2, 0, 1, 1, 2, 0, 2});
  r = RunOp(MakeNode("TfIdfVectorizer", 1, 1,
                     {StringAttr("mode", "TFIDF"), IntAttr("min_gram_length", 2), IntAttr("max_gram_length", 2),
                      IntAttr("max_skip_count", 2), IntsAttr("ngram_counts", {0, 3}),
                      IntsAttr("ngram_indexes", {4, 3, 2, 0, 1}), IntsAttr("pool_int64s", {1, 2, 3, 2, 3, 3, 1}),
                      FloatsAttr("weights", {0.5f, 2.0f, 4.0f, 8.0f, 16.0f})}),
            9, {x});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 5}, {1.5f, 0, 0, 0, 0, 0, 4, 0, 0, 0});
  r = RunOp(MakeNode("TfIdfVectorizer", 1, 1,
                     {StringAttr("mode", "IDF"), IntAttr("min_gram_length", 1), IntAttr("max_gram_length", 1),
                      IntAttr("max_skip_count", 0), IntsAttr("ngram_counts", {0}), IntsAttr("ngram_indexes", {1, 0}),
                      StringsAttr("pool_strings", {"a", "c"}), FloatsAttr("weights", {0.25f, 3.0f})}),
            9, {S({"a", "b", "a", "c"}, {4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2}, {0.25f, 3});
  // More pool n-grams than ngram_indexes entries is an error, not a wild read.
  attrs[5] = IntsAttr("ngram_indexes", {0, 1});
  ExpectError(RunOp(MakeNode("TfIdfVectorizer", 1, 1, attrs), 9, {x}), StatusCode::kInvalidModel, "ngram_indexes");
}

// ---- com.microsoft Tokenizer: expected values from ONNX Runtime 1.32 on the same nodes ----

Node TokenizerNode(std::vector<Attribute> attrs) {
  return MakeNode("Tokenizer", 1, 1, std::move(attrs), "com.microsoft");
}

Value TokenizerInput() { return S({"the cat, sat.", "a", "on  the-mat!", ""}, {2, 2}); }

TEST(TextTokenizer, SeparatorsSplitInTurn) {
  const std::vector<std::string> separators = {" ", "[.]", ",", "\\!", "-"};
  auto r = RunOp(TokenizerNode({IntAttr("mark", 0), StringAttr("pad_value", "#"), IntAttr("mincharnum", 1),
                                StringsAttr("separators", separators)}),
                 1, {TokenizerInput()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outputs[0].tensor().dims(), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(Strings(r->outputs[0].tensor()),
            (std::vector<std::string>{"the", "cat", "sat", "a", "#", "#", "on", "the", "mat", "#", "#", "#"}));
  // mark adds start/end tokens around each row (also around no tokens); short tokens go.
  r = RunOp(TokenizerNode({IntAttr("mark", 1), StringAttr("pad_value", "~"), IntAttr("mincharnum", 2),
                           StringsAttr("separators", separators)}),
            1, {TokenizerInput()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outputs[0].tensor().dims(), (std::vector<int64_t>{2, 2, 5}));
  EXPECT_EQ(Strings(r->outputs[0].tensor()),
            (std::vector<std::string>{"\x02", "the", "cat", "sat", "\x03", "\x02", "\x03", "~", "~", "~",
                                      "\x02", "on", "the", "mat", "\x03", "\x02", "\x03", "~", "~", "~"}));
}

TEST(TextTokenizer, TokenExpressionMatches) {
  auto r = RunOp(TokenizerNode({IntAttr("mark", 0), StringAttr("pad_value", "#"), IntAttr("mincharnum", 1),
                                StringAttr("tokenexp", "[a-zA-Z0-9_]+")}),
                 1, {TokenizerInput()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outputs[0].tensor().dims(), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(Strings(r->outputs[0].tensor()),
            (std::vector<std::string>{"the", "cat", "sat", "a", "#", "#", "on", "the", "mat", "#", "#", "#"}));
  // A match shorter than mincharnum is skipped by one character ("on" -> "n" -> nothing).
  r = RunOp(TokenizerNode({IntAttr("mark", 0), StringAttr("pad_value", "#"), IntAttr("mincharnum", 3),
                           StringAttr("tokenexp", "[a-z]+")}),
            1, {TokenizerInput()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Strings(r->outputs[0].tensor()),
            (std::vector<std::string>{"the", "cat", "sat", "#", "#", "#", "the", "mat", "#", "#", "#", "#"}));
}

TEST(TextTokenizer, CharactersAndEmptyResults) {
  auto r = RunOp(TokenizerNode({IntAttr("mark", 1), StringAttr("pad_value", "#"), IntAttr("mincharnum", 1),
                                StringAttr("tokenexp", ".")}),
                 1, {S({"ab", "\xc3\xa9!"}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outputs[0].tensor().dims(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(Strings(r->outputs[0].tensor()),
            (std::vector<std::string>{"\x02", "a", "b", "\x03", "\x02", "\xc3\xa9", "!", "\x03"}));
  r = RunOp(TokenizerNode({IntAttr("mark", 0), StringAttr("pad_value", "#"), IntAttr("mincharnum", 1),
                           StringsAttr("separators", {""})}),
            1, {S({"ab", ""}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Strings(r->outputs[0].tensor()), (std::vector<std::string>{"a", "b", "#", "#"}));
  // Only separators: no tokens anywhere, the new axis is empty (marks are not added).
  r = RunOp(TokenizerNode({IntAttr("mark", 1), StringAttr("pad_value", "#"), IntAttr("mincharnum", 1),
                           StringsAttr("separators", {" "})}),
            1, {S({"  ", " "}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outputs[0].tensor().dims(), (std::vector<int64_t>{2, 0}));
}

TEST(TextTokenizer, RejectsBadAttributesAndUnsupportedPatterns) {
  ExpectError(RunOp(TokenizerNode({IntAttr("mincharnum", 0), StringAttr("tokenexp", "a")}), 1, {TokenizerInput()}),
              StatusCode::kInvalidModel, "mincharnum");
  ExpectError(RunOp(TokenizerNode({StringAttr("pad_value", "#")}), 1, {TokenizerInput()}),
              StatusCode::kInvalidModel, "separators");
  ExpectError(RunOp(TokenizerNode({IntAttr("mincharnum", 2), StringsAttr("separators", {""})}), 1, {TokenizerInput()}),
              StatusCode::kInvalidModel, "too big");
  // RE2 matches leftmost-longest, std::regex leftmost-first: alternations are refused.
  ExpectError(RunOp(TokenizerNode({StringAttr("tokenexp", "a|ab")}), 1, {TokenizerInput()}),
              StatusCode::kNotImplemented, "alternation");
  ExpectError(RunOp(TokenizerNode({StringAttr("tokenexp", "[a-z]+")}), 1, {S({"x"}, {1, 1, 1})}),
              StatusCode::kInvalidModel, "[C] or [N, C]");
}

}  // namespace
}  // namespace nee::testing
