#pragma once
// A small, strict JSON value: enough for checkpoint headers and config files that
// may come from strangers. The parser accepts exactly RFC 8259 JSON and rejects
// everything a lenient parser would guess about:
//  - trailing garbage, trailing commas, comments, a byte-order mark;
//  - raw control characters (< 0x20) in strings, invalid UTF-8, lone surrogates
//    in \uXXXX escapes (so every string it returns is valid UTF-8);
//  - duplicate keys in one object (a reader could not tell which one was meant);
//  - nesting deeper than kMaxDepth (bounds the recursion of dump(), == and ~Json);
//  - numbers that overflow a double, such as 1e999 (JSON has no infinity, so the
//    value could not be written back). Underflow (1e-999) reads as 0 or a denormal.
// Numbers without a fraction or exponent that fit in int64 are kept exactly as
// Int; every other number is a Double ("2.0" is a Double, not an Int).
// Errors throw folio::Error: "[json] <what> at byte N" (N counts from 0). Syntax,
// UTF-8 and escape errors are found by nlohmann-json's parser (json.cpp; this header
// does not include it) and keep its wording: "[json] syntax error while parsing
// array - unexpected number literal; expected ']' at byte 3". The other rules above
// are json.cpp's own.
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace folio {

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;  // keeps insertion order
  enum class Type { Null, Bool, Int, Double, String, Array, Object };
  static constexpr int kMaxDepth = 64;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : v_(b) {}
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Json(T i) : v_(checked_int(i)) {}
  Json(double d) : v_(d) {}
  Json(const char* s) : v_(std::string(s)) {}
  Json(std::string_view s) : v_(std::string(s)) {}
  Json(std::string s) : v_(std::move(s)) {}
  Json(Array a) : v_(std::move(a)) {}
  Json(Object o) : v_(std::move(o)) {}

  Type type() const { return Type(v_.index()); }
  const char* type_name() const;  // "null", "bool", "integer", "number", "string", "array", "object"
  bool is_null() const { return type() == Type::Null; }
  bool is_bool() const { return type() == Type::Bool; }
  bool is_int() const { return type() == Type::Int; }
  bool is_number() const { return is_int() || type() == Type::Double; }
  bool is_string() const { return type() == Type::String; }
  bool is_array() const { return type() == Type::Array; }
  bool is_object() const { return type() == Type::Object; }

  // Typed access; a wrong type throws "[json] expected <type>, got <type>".
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;  // Int or Double
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;
  Array& as_array();
  Object& as_object();

  // The value under `key` of an object, or nullptr (also when this is not an object).
  const Json* find(std::string_view key) const;

  static Json parse(std::string_view text);
  // Compact text (no spaces), keys in insertion order, strings escaped so the output
  // is plain JSON any parser reads back. NaN and infinity throw (JSON cannot hold them).
  // String bytes >= 0x80 are copied as they are: a string built in code that is not
  // valid UTF-8 gives text that parse() refuses.
  std::string dump() const;

  bool operator==(const Json& o) const { return v_ == o.v_; }

 private:
  template <class T>
  static int64_t checked_int(T i) {
    if constexpr (std::unsigned_integral<T> && sizeof(T) >= sizeof(int64_t))
      if (i > uint64_t(INT64_MAX)) throw_int_range();
    return int64_t(i);
  }
  [[noreturn]] static void throw_int_range();
  void dump_to(std::string& out) const;

  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> v_;
};

// `s` as a JSON string literal, quotes included: the safe way to show a name taken
// from a file in an error message (control characters come out escaped).
std::string json_quote(std::string_view s);

}  // namespace folio
