#include "io/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <numeric>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace folio {
namespace {

// The byte at `at` as it should appear in a message.
std::string describe(std::string_view text, size_t at) {
  if (at >= text.size()) return "end of input";
  const unsigned char c = text[at];
  if (c >= 0x20 && c < 0x7f) return cat("'", char(c), "'");
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", c);
  return cat("byte ", buf);
}

// An iterator over the text that records how far nlohmann's lexer has read. SAX
// events carry no position, and the checks the builder below adds (depth, duplicate
// keys) must say where the fault is. The lexer reads one byte past a number only;
// a bracket or a key's closing quote is the last byte read when its event arrives.
struct Cursor {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  const char* p;
  const char** read_to;  // one past the last byte handed to the lexer

  reference operator*() const { return *p; }
  Cursor& operator++() {
    *read_to = ++p;
    return *this;
  }
  Cursor operator++(int) {
    Cursor old = *this;
    ++*this;
    return old;
  }
  bool operator==(const Cursor& o) const { return p == o.p; }
};

// nlohmann's SAX parser does the lexing (RFC 8259 syntax, UTF-8 and \u surrogate
// validation, no comments, nothing after the value); this handler builds the Json
// and adds the rules nlohmann does not have: a depth limit, no duplicate keys, and
// integers kept exact as int64 apart from every other number.
class Builder {
 public:
  Builder(std::string_view text, const char* const& read_to) : s_(text), read_to_(read_to) {}

  Json result() && { return std::move(root_); }

  bool null() { return put(Json()); }
  bool boolean(bool b) { return put(Json(b)); }
  bool number_integer(int64_t i) { return put(Json(i)); }
  // Above int64 it is a Double, like every number that is not an exact int64.
  bool number_unsigned(uint64_t u) { return put(u <= uint64_t(INT64_MAX) ? Json(int64_t(u)) : Json(double(u))); }
  // Overflow (1e999) never gets here: nlohmann reports it as error 406. Underflow
  // (1e-999) reads as 0 or a denormal.
  bool number_float(double d, const std::string&) { return put(Json(d)); }
  bool string(std::string& s) { return put(Json(std::move(s))); }
  bool binary(nlohmann::json::binary_t&) { fail("json", "unexpected binary value"); }  // CBOR & co. only

  bool start_array(size_t) { return open(Json::Array{}); }
  bool end_array() { return close(); }
  bool start_object(size_t) {
    keys_from_.push_back(key_end_.size());
    return open(Json::Object{});
  }
  bool key(std::string& k) {
    key_end_.push_back(last_read());  // the closing quote
    open_.back().as_object().emplace_back(std::move(k), Json());
    return true;
  }
  bool end_object() {
    check_unique(open_.back().as_object(), keys_from_.back());
    key_end_.resize(keys_from_.back());
    keys_from_.pop_back();
    return close();
  }

  // nlohmann's own errors, "at byte N" like ours. `position` counts the bytes read,
  // the one at fault included (the end of input counts as one); `token` is the text
  // of the last token, whole for strings and numbers only.
  bool parse_error(size_t position, const std::string& token, const nlohmann::detail::exception& e) {
    if (e.id == 406) error_at(position - token.size(), "number ", token.substr(0, 40), " out of range");
    std::string_view what = e.what();  // "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    if (const size_t colon = what.find(": "); colon != std::string_view::npos) what.remove_prefix(colon + 2);
    const size_t at = position ? position - 1 : 0;
    // The lexer stopped at a byte that starts or continues no token. nlohmann quotes
    // the text read so far (unbounded, any bytes); show the byte at fault instead.
    const std::string quoted = "; last read: '" + token + "'";
    if (const size_t k = what.find(quoted); k != std::string_view::npos)
      error_at(at, what.substr(0, k), "; found ", describe(s_, at), what.substr(k + quoted.size()));
    // A whole token in the wrong place: point at its start.
    constexpr std::string_view unexpected = "- unexpected ";
    const size_t u = what.find(unexpected);
    const std::string_view name = u == std::string_view::npos ? "" : what.substr(u + unexpected.size());
    if (name.starts_with("end of input") && at < s_.size())  // nlohmann ends the input at a NUL byte
      error_at(at, what.substr(0, u), "- invalid literal; found byte 0x00", name.substr(12));
    size_t length = 1;
    if (name.starts_with("string literal") || name.starts_with("number literal")) length = token.size();
    if (name.starts_with("true literal") || name.starts_with("null literal")) length = 4;
    if (name.starts_with("false literal")) length = 5;
    error_at(position - std::min(position, length), what);
  }

 private:
  std::string_view s_;
  const char* const& read_to_;
  Json root_;
  std::vector<Json> open_;         // the arrays and objects being read, outermost first
  std::vector<size_t> key_end_;    // where each key of the open objects ends (its closing quote)
  std::vector<size_t> keys_from_;  // for each open object, its first entry in key_end_

  template <class... Parts>
  [[noreturn]] void error_at(size_t at, const Parts&... parts) const {
    fail("json", parts..., " at byte ", at);
  }

  size_t last_read() const { return size_t(read_to_ - s_.data()) - 1; }

  bool open(Json container) {
    if (open_.size() >= size_t(Json::kMaxDepth)) error_at(last_read(), "nesting deeper than ", Json::kMaxDepth);
    open_.push_back(std::move(container));
    return true;
  }
  bool close() {
    Json done = std::move(open_.back());
    open_.pop_back();
    return put(std::move(done));
  }
  bool put(Json v) {
    if (open_.empty()) root_ = std::move(v);
    else if (open_.back().is_array()) open_.back().as_array().push_back(std::move(v));
    else open_.back().as_object().back().second = std::move(v);  // after its key()
    return true;
  }

  // Duplicate keys, found by sorting once the object is complete: O(n log n) with
  // no per-key allocation, since an object in a hostile file may have millions of keys.
  void check_unique(const Json::Object& o, size_t first_key) const {
    std::vector<size_t> order(o.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const int c = o[a].first.compare(o[b].first);
      return c ? c < 0 : a < b;
    });
    size_t dup = SIZE_MAX;  // the earliest second occurrence of any key
    for (size_t k = 1; k < order.size(); ++k)
      if (o[order[k]].first == o[order[k - 1]].first) dup = std::min(dup, order[k]);
    if (dup != SIZE_MAX) error_at(key_start(key_end_[first_key + dup]), "duplicate key ", json_quote(o[dup].first));
  }

  // The opening quote of the key whose closing quote is at `close`: the nearest quote
  // before it that no backslash escapes (the lexer accepted the key, so any quote
  // inside it is escaped).
  size_t key_start(size_t close) const {
    size_t at = close;
    for (;;) {
      at = s_.rfind('"', at - 1);
      size_t backslashes = 0;
      while (backslashes < at && s_[at - 1 - backslashes] == '\\') ++backslashes;
      if (backslashes % 2 == 0) return at;
    }
  }
};

void escape_to(std::string& out, std::string_view s) {
  out += '"';
  for (const char ch : s) {
    const unsigned char c = ch;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
}

}  // namespace

const char* Json::type_name() const {
  static const char* names[] = {"null", "bool", "integer", "number", "string", "array", "object"};
  return names[v_.index()];
}

void Json::throw_int_range() { fail("json", "integer does not fit in int64"); }

bool Json::as_bool() const {
  if (!is_bool()) fail("json", "expected bool, got ", type_name());
  return std::get<bool>(v_);
}
int64_t Json::as_int() const {
  if (!is_int()) fail("json", "expected integer, got ", type_name());
  return std::get<int64_t>(v_);
}
double Json::as_double() const {
  if (is_int()) return double(std::get<int64_t>(v_));
  if (type() != Type::Double) fail("json", "expected number, got ", type_name());
  return std::get<double>(v_);
}
const std::string& Json::as_string() const {
  if (!is_string()) fail("json", "expected string, got ", type_name());
  return std::get<std::string>(v_);
}
const Json::Array& Json::as_array() const {
  if (!is_array()) fail("json", "expected array, got ", type_name());
  return std::get<Array>(v_);
}
const Json::Object& Json::as_object() const {
  if (!is_object()) fail("json", "expected object, got ", type_name());
  return std::get<Object>(v_);
}
Json::Array& Json::as_array() { return const_cast<Array&>(std::as_const(*this).as_array()); }
Json::Object& Json::as_object() { return const_cast<Object&>(std::as_const(*this).as_object()); }

const Json* Json::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [k, v] : std::get<Object>(v_))
    if (k == key) return &v;
  return nullptr;
}

Json Json::parse(std::string_view text) {
  // nlohmann skips a byte-order mark; JSON text has none (RFC 8259 section 8.1).
  if (text.starts_with('\xef'))
    fail("json", "syntax error while parsing value - invalid literal; found byte 0xef at byte 0");
  const char* read_to = text.data();
  Builder builder(text, read_to);
  const Cursor first{text.data(), &read_to}, last{text.data() + text.size(), &read_to};
  // strict: nothing but whitespace after the value; no comments.
  if (!nlohmann::json::sax_parse(first, last, &builder, nlohmann::json::input_format_t::json, true, false))
    fail("json", "unreadable at byte ", size_t(read_to - text.data()));  // every error above throws first
  // nlohmann takes a NUL byte for the end of input, so it stops early at one.
  if (read_to != last.p || text.ends_with('\0'))
    fail("json", "syntax error while parsing value - invalid literal; found byte 0x00; expected end of input at byte ",
         size_t(read_to - text.data()) - 1);
  return std::move(builder).result();
}

std::string Json::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

// Our own writer, not nlohmann's dump(): for doubles nlohmann's Grisu2 output differs
// from the std::to_chars shortest form checkpoints have always held (0.0003 for 3e-04,
// 100000.0 for 1e+05, 7.689999620197341e-06 for 7.68999962019734e-06), and a resumed
// run must write the header bytes an uninterrupted run would have written.
void Json::dump_to(std::string& out) const {
  switch (type()) {
    case Type::Null: out += "null"; break;
    case Type::Bool: out += std::get<bool>(v_) ? "true" : "false"; break;
    case Type::Int: out += std::to_string(std::get<int64_t>(v_)); break;
    case Type::Double: {
      const double d = std::get<double>(v_);
      if (!std::isfinite(d)) fail("json", "cannot write ", d, ": JSON has no NaN or infinity");
      char buf[32];
      auto [p, ec] = std::to_chars(buf, buf + sizeof buf, d);  // shortest exact form
      std::string_view text(buf, size_t(p - buf));
      out += text;
      // Keep it a Double when read back: "1" would come back as an Int.
      if (text.find_first_of(".eE") == std::string_view::npos) out += ".0";
      break;
    }
    case Type::String: escape_to(out, std::get<std::string>(v_)); break;
    case Type::Array: {
      out += '[';
      bool first = true;
      for (const Json& v : std::get<Array>(v_)) {
        if (!first) out += ',';
        first = false;
        v.dump_to(out);
      }
      out += ']';
      break;
    }
    case Type::Object: {
      out += '{';
      bool first = true;
      for (const auto& [k, v] : std::get<Object>(v_)) {
        if (!first) out += ',';
        first = false;
        escape_to(out, k);
        out += ':';
        v.dump_to(out);
      }
      out += '}';
      break;
    }
  }
}

std::string json_quote(std::string_view s) {
  std::string out;
  escape_to(out, s);
  return out;
}

}  // namespace folio
