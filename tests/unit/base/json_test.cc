// The small JSON value of base/json.h. Expected texts follow RFC 8259 and
// agree with Python's json module (json.loads of the same inputs gives the
// same values; e.g. json.loads('"\\ud83d\\ude00 \\u00e9"').encode() is
// b'\xf0\x9f\x98\x80 \xc3\xa9').
#include "base/json.h"

#include <gtest/gtest.h>

#include <string>

namespace nee {
namespace {

TEST(Json, ParsesEveryKindAndKeepsMemberOrder) {
  auto parsed = Json::Parse(R"( {"b": [1, 2.5, -3e-7, true, false, null], "a": {"s": "x"}} )");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Json& j = *parsed;
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j.members().size(), 2u);
  EXPECT_EQ(j.members()[0].first, "b");
  const Json* b = j.Find("b");
  ASSERT_TRUE(b && b->is_array());
  ASSERT_EQ(b->items().size(), 6u);
  EXPECT_EQ(b->items()[0].number(), 1);
  EXPECT_EQ(b->items()[1].number(), 2.5);
  EXPECT_DOUBLE_EQ(b->items()[2].number(), -3e-7);
  EXPECT_TRUE(b->items()[3].boolean());
  EXPECT_EQ(b->items()[4].kind(), Json::Kind::kBool);
  EXPECT_EQ(b->items()[5].kind(), Json::Kind::kNull);
  EXPECT_EQ(j.Find("a")->StringAt("s"), "x");
  EXPECT_EQ(j.StringAt("missing"), "");
}

TEST(Json, DecodesEscapesAndSurrogatePairs) {
  auto parsed = Json::Parse(R"("q\"\\\/\b\f\n\r\t\u0001 \ud83d\ude00 \u00e9")");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->string(), "q\"\\/\b\f\n\r\t\x01 \xf0\x9f\x98\x80 \xc3\xa9");
}

TEST(Json, SerializesWhatItParses) {
  Json j = Json::Object();
  j.Set("s", "q\"\\\n\x01\xc3\xa9").Set("n", Json::Number(3)).Set("f", Json::Number(0.5));
  j.Set("a", Json::Array().Push(Json::Bool(true)).Push(Json()));
  j.Set("n", Json::Number(4));  // replaces in place
  // Python: json.dumps({"s": "q\"\\\n\x01é", "n": 4, "f": 0.5, "a": [True, None]},
  //                    separators=(",", ":"), ensure_ascii=False)
  EXPECT_EQ(j.Serialize(), "{\"s\":\"q\\\"\\\\\\n\\u0001\xc3\xa9\",\"n\":4,\"f\":0.5,\"a\":[true,null]}");
  auto back = Json::Parse(j.Serialize(2));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Serialize(), j.Serialize());
}

TEST(Json, ReplacesInvalidUtf8WithTheReplacementCharacter) {
  // A lone continuation byte, a truncated sequence, an overlong '/' and a surrogate.
  EXPECT_EQ(JsonQuote("a\x80z"), "\"a\xef\xbf\xbdz\"");
  EXPECT_EQ(JsonQuote("\xe2\x82"), "\"\xef\xbf\xbd\xef\xbf\xbd\"");
  EXPECT_EQ(JsonQuote("\xc0\xaf"), "\"\xef\xbf\xbd\xef\xbf\xbd\"");
  EXPECT_EQ(JsonQuote("\xed\xa0\x80"), "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
}

TEST(Json, RefusesMalformedTextWithTheOffset) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "\"abc", "tru", "01", "1.", "-", "\"\\x\"",
                          "\"\\ud83d\"", "\"\\ude00\"", "\"a\nb\"", "[1] 2", "{1:2}", "nul"}) {
    auto parsed = Json::Parse(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_NE(parsed.status().message().find("at byte"), std::string::npos) << bad;
    }
  }
}

TEST(Json, BoundsNesting) {
  EXPECT_TRUE(Json::Parse(std::string(60, '[') + std::string(60, ']')).ok());
  auto deep = Json::Parse(std::string(100000, '['));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nesting"), std::string::npos);
}

}  // namespace
}  // namespace nee
