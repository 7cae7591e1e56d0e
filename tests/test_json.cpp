// The strict JSON reader and writer under the checkpoint headers: round trips, exact
// int64, and one clear Error naming the byte at fault (never a crash) per bad input.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "base/error.h"
#include "io/json.h"
#include "tests/support.h"

namespace folio {
namespace {

using testing::error_of;
using testing::expect_error;

TEST(Json, RoundTripNested) {
  const std::string text = R"({"z":[1,-2,3.5,true,false,null,{"b":"c","a":[]}],"y":{},"x":"s","w":-0.25})";
  const Json v = Json::parse(text);
  EXPECT_EQ(v.dump(), text);  // keys keep insertion order, not sorted
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(v.as_object()[0].first, "z");
  EXPECT_EQ(v.find("z")->as_array()[1].as_int(), -2);
  EXPECT_EQ(v.find("z")->as_array()[2].as_double(), 3.5);
  EXPECT_EQ(v.find("x")->as_string(), "s");
  EXPECT_EQ(v.find("missing"), nullptr);
  EXPECT_EQ(Json::parse(v.dump()), v);
  // Whitespace between tokens is allowed and dropped.
  EXPECT_EQ(Json::parse(" \t\r\n[ 1 , { \"k\" : null } ]\n ").dump(), R"([1,{"k":null}])");
}

TEST(Json, Escapes) {
  const Json v = Json::parse(R"("q\" b\\ s\/ \b\f\n\r\t \u0001")");
  EXPECT_EQ(v.as_string(), "q\" b\\ s/ \b\f\n\r\t \x01");
  EXPECT_EQ(v.dump(), R"("q\" b\\ s/ \b\f\n\r\t \u0001")");
  std::string every;  // every byte 1..127 survives a round trip
  for (int c = 1; c < 128; ++c) every += char(c);
  EXPECT_EQ(Json::parse(Json(every).dump()).as_string(), every);
  EXPECT_EQ(Json::parse(R"("a\u0000b")").as_string(), std::string("a\0b", 3));
  EXPECT_EQ(json_quote("x\x1b]"), R"("x\u001b]")");
}

TEST(Json, Unicode) {
  EXPECT_EQ(Json::parse(R"("caf\u00e9")").as_string(), "caf\xc3\xa9");
  EXPECT_EQ(Json::parse(R"("caf\u00E9")").as_string(), "caf\xc3\xa9");
  EXPECT_EQ(Json::parse(R"("\u20ac")").as_string(), "\xe2\x82\xac");
  EXPECT_EQ(Json::parse(R"("\ud83d\ude00")").as_string(), "\xf0\x9f\x98\x80");  // surrogate pair -> U+1F600
  EXPECT_EQ(Json::parse("\"h\xc3\xa9 \xf0\x9f\x98\x80\"").as_string(), "h\xc3\xa9 \xf0\x9f\x98\x80");  // raw UTF-8
  EXPECT_EQ(Json("\xc3\xa9").dump(), "\"\xc3\xa9\"");  // written as UTF-8, not escaped
  // Every string returned is valid UTF-8, so these are refused.
  expect_error([] { Json::parse(R"("\ud83d")"); }, {"[json]", "surrogate", "at byte 7"});  // where \uDC00.. belongs
  expect_error([] { Json::parse(R"("\ude00")"); }, {"[json]", "surrogate"});
  expect_error([] { Json::parse(R"("\ud83d\u0041")"); }, {"[json]", "surrogate"});
  expect_error([] { Json::parse(R"("\u12G4")"); }, {"[json]", "hex"});
  expect_error([] { Json::parse("\"\xff\""); }, {"[json]", "UTF-8", "at byte 1"});
  expect_error([] { Json::parse("\"\xc0\xaf\""); }, {"[json]", "UTF-8"});      // overlong '/'
  expect_error([] { Json::parse("\"\xed\xa0\x80\""); }, {"[json]", "UTF-8"});  // encoded surrogate
  expect_error([] { Json::parse("\"\xf4\x90\x80\x80\""); }, {"[json]", "UTF-8"});  // above U+10FFFF
  expect_error([] { Json::parse("\"\xe2\x82\""); }, {"[json]", "UTF-8"});  // truncated sequence
}

TEST(Json, NumbersKeepInt64Exact) {
  const Json big = Json::parse("[9223372036854775807,-9223372036854775808,9007199254740993]");
  EXPECT_EQ(big.as_array()[0].as_int(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(big.as_array()[1].as_int(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(big.as_array()[2].as_int(), 9007199254740993);  // 2^53 + 1: a double would lose it
  EXPECT_EQ(big.dump(), "[9223372036854775807,-9223372036854775808,9007199254740993]");
  EXPECT_TRUE(Json::parse("9223372036854775808").type() == Json::Type::Double);  // beyond int64
  EXPECT_TRUE(Json::parse("2.0").type() == Json::Type::Double);
  EXPECT_TRUE(Json::parse("1e2").type() == Json::Type::Double);
  EXPECT_EQ(Json::parse("-0").as_int(), 0);
  EXPECT_EQ(Json(2.0).dump(), "2.0");  // stays a Double when read back
  EXPECT_EQ(Json(0.1).dump(), "0.1");  // shortest exact form
  EXPECT_EQ(Json::parse(Json(1.0 / 3).dump()).as_double(), 1.0 / 3);
  EXPECT_EQ(Json::parse("1E-2").as_double(), 0.01);
  EXPECT_EQ(Json::parse("1e-999").as_double(), 0.0);  // underflow reads as 0
  expect_error([] { Json(std::numeric_limits<double>::infinity()).dump(); }, {"[json]", "inf"});
  expect_error([] { Json(uint64_t(1) << 63); }, {"[json]", "int64"});
  expect_error([] { Json::parse("\"x\"").as_int(); }, {"[json]", "expected integer, got string"});
}

// 1e999 overflows a double. JSON has no infinity, so it is refused rather than read
// as inf (which could not be written back).
TEST(Json, RejectsNumberOutOfRange) {
  expect_error([] { Json::parse("1e999"); }, {"[json]", "out of range", "at byte 0"});
  expect_error([] { Json::parse("[-1e999]"); }, {"[json]", "out of range", "at byte 1"});
}

// Syntax errors are nlohmann's (its wording), each ending "at byte N": the byte at
// fault, or the start of a whole token that is out of place.
TEST(Json, Rejects) {
  using namespace std::string_literals;
  const std::pair<std::string, std::string> cases[] = {
      {"[1,2,]", "unexpected ']'; expected '[', '{', or a literal at byte 5"},  // trailing comma
      {R"({"a":1,})", "object key - unexpected '}'; expected string literal at byte 7"},
      {R"({"a":1,"a":2})", "duplicate key \"a\" at byte 7"},
      {R"({"q\"\\":1,"q\"\\":2})", R"(duplicate key "q\"\\" at byte 11)"},  // escaped quotes in keys
      {R"({"a":{"b":1,"b":2},"c":1})", "duplicate key \"b\" at byte 12"},       // in a nested object
      {R"(["abc)", "missing closing quote; found end of input at byte 5"},
      {"\"a\nb\"", "control character U+000A (LF) must be escaped to \\u000A or \\n; found byte 0x0a at byte 2"},
      {"\"a\tb\"", "control character U+0009 (HT) must be escaped to \\u0009 or \\t; found byte 0x09 at byte 2"},
      {"\"a\0b\""s, "control character U+0000 (NUL) must be escaped to \\u0000; found byte 0x00 at byte 2"},
      {"{} x", "invalid literal; found 'x'; expected end of input at byte 3"},  // trailing garbage
      {"{}{}", "unexpected '{'; expected end of input at byte 2"},
      {"{}\0x"s, "invalid literal; found byte 0x00; expected end of input at byte 2"},  // nlohmann stops at a NUL
      {"{}\0"s, "invalid literal; found byte 0x00; expected end of input at byte 2"},
      {"[1\0]"s, "array - invalid literal; found byte 0x00; expected ']' at byte 2"},
      {"", "unexpected end of input; expected '[', '{', or a literal at byte 0"},
      {"01", "unexpected number literal; expected end of input at byte 1"},  // no leading zeros
      {"1.", "expected digit after '.'; found end of input at byte 2"},
      {"+1", "invalid literal; found '+' at byte 0"},
      {".5", "invalid literal; found '.' at byte 0"},
      {"NaN", "invalid literal; found 'N' at byte 0"},
      {"'a'", "invalid literal; found ''' at byte 0"},
      {"tru", "invalid literal; found end of input at byte 3"},
      {R"("\x")", "forbidden character after backslash; found 'x' at byte 2"},
      {"[1 2]", "array - unexpected number literal; expected ']' at byte 3"},
      {"[1 -2.5e3]", "array - unexpected number literal; expected ']' at byte 3"},
      {R"([1 "xyz"])", "array - unexpected string literal; expected ']' at byte 3"},
      {"[1 false]", "array - unexpected false literal; expected ']' at byte 3"},
      {R"({"a" 1})", "object separator - unexpected number literal; expected ':' at byte 5"},
      {"// c\n1", "invalid literal; found '/' at byte 0"},             // no comments
      {"\xef\xbb\xbf{}", "invalid literal; found byte 0xef at byte 0"},  // no byte-order mark
  };
  for (const auto& [text, fragment] : cases) {
    const bool ours = fragment.starts_with("duplicate");
    expect_error([&] { Json::parse(text); }, {ours ? "[json] " : "[json] syntax error while parsing ", fragment});
  }
}

// nlohmann quotes everything its lexer read of a bad token; messages show the one
// byte at fault instead, so a huge or binary header cannot flood a message.
TEST(Json, ErrorsShowTheByteAtFaultNotTheText) {
  const std::string text = "[\"" + std::string(100'000, 'a') + "\xff\"]";
  const std::string msg = error_of([&] { Json::parse(text); });
  EXPECT_NE(msg.find("ill-formed UTF-8 byte; found byte 0xff at byte 100002"), std::string::npos) << msg;
  EXPECT_LT(msg.size(), 120u) << msg;
}

TEST(Json, RejectsDeepNesting) {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  EXPECT_NO_THROW(Json::parse(nested(Json::kMaxDepth)));
  expect_error([&] { Json::parse(nested(Json::kMaxDepth + 1)); }, {"[json]", "nesting deeper than 64", "at byte 64"});
  expect_error([&] { Json::parse(nested(100)); }, {"[json]", "nesting deeper than 64"});
  std::string objects;
  for (int i = 0; i < 100; ++i) objects += "{\"a\":";
  expect_error([&] { Json::parse(objects); }, {"[json]", "nesting deeper than 64"});
  expect_error([&] { Json::parse(std::string(1'000'000, '[')); }, {"[json]", "nesting"});  // no stack overflow
}

}  // namespace
}  // namespace folio
