#include "io/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <numeric>

#include "autograd/error.h"
#include "data/vocab.h"

namespace folio {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Json document() {
    skip_space();
    Json v = value(0);
    skip_space();
    if (i_ != s_.size()) error("unexpected ", describe(), " after the value");
    return v;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;

  template <class... Parts>
  [[noreturn]] void error(const Parts&... parts) const {
    fail("json", parts..., " at byte ", i_);
  }
  template <class... Parts>
  [[noreturn]] void error_at(size_t at, const Parts&... parts) const {
    fail("json", parts..., " at byte ", at);
  }

  // The byte at i_ as it should appear in a message.
  std::string describe() const {
    if (i_ >= s_.size()) return "end of input";
    const unsigned char c = s_[i_];
    if (c >= 0x20 && c < 0x7f) return cat("'", char(c), "'");
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", c);
    return cat("byte ", buf);
  }

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  void expect_word(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) error("unexpected ", describe());
    i_ += word.size();
  }

  Json value(int depth) {
    if (i_ >= s_.size()) error("unexpected end of input");
    switch (s_[i_]) {
      case '{': return object(depth + 1);
      case '[': return array(depth + 1);
      case '"': return Json(string());
      case 't': expect_word("true"); return Json(true);
      case 'f': expect_word("false"); return Json(false);
      case 'n': expect_word("null"); return Json();
      default:
        if (s_[i_] == '-' || (s_[i_] >= '0' && s_[i_] <= '9')) return number();
        error("unexpected ", describe());
    }
  }

  Json array(int depth) {
    if (depth > Json::kMaxDepth) error("nesting deeper than ", Json::kMaxDepth);
    ++i_;  // '['
    Json::Array a;
    skip_space();
    if (i_ < s_.size() && s_[i_] == ']') { ++i_; return Json(std::move(a)); }
    for (;;) {
      skip_space();
      a.push_back(value(depth));
      skip_space();
      if (i_ < s_.size() && s_[i_] == ',') { ++i_; continue; }
      if (i_ < s_.size() && s_[i_] == ']') { ++i_; return Json(std::move(a)); }
      error("expected ',' or ']' but found ", describe());
    }
  }

  Json object(int depth) {
    if (depth > Json::kMaxDepth) error("nesting deeper than ", Json::kMaxDepth);
    ++i_;  // '{'
    Json::Object o;
    std::vector<size_t> key_at;  // where each key starts, to point at a duplicate
    skip_space();
    if (i_ < s_.size() && s_[i_] == '}') { ++i_; return Json(std::move(o)); }
    for (;;) {
      skip_space();
      if (i_ >= s_.size() || s_[i_] != '"') error("expected a string key but found ", describe());
      key_at.push_back(i_);
      std::string key = string();
      skip_space();
      if (i_ >= s_.size() || s_[i_] != ':') error("expected ':' but found ", describe());
      ++i_;
      skip_space();
      o.emplace_back(std::move(key), value(depth));
      skip_space();
      if (i_ < s_.size() && s_[i_] == ',') { ++i_; continue; }
      if (i_ < s_.size() && s_[i_] == '}') { ++i_; break; }
      error("expected ',' or '}' but found ", describe());
    }
    check_unique(o, key_at);
    return Json(std::move(o));
  }

  // Duplicate keys, found by sorting once the object is complete: O(n log n) with
  // no per-key allocation, since an object in a hostile file may have millions of keys.
  void check_unique(const Json::Object& o, const std::vector<size_t>& key_at) const {
    std::vector<size_t> order(o.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const int c = o[a].first.compare(o[b].first);
      return c ? c < 0 : a < b;
    });
    size_t dup = SIZE_MAX;  // the earliest second occurrence of any key
    for (size_t k = 1; k < order.size(); ++k)
      if (o[order[k]].first == o[order[k - 1]].first) dup = std::min(dup, order[k]);
    if (dup != SIZE_MAX) error_at(key_at[dup], "duplicate key ", json_quote(o[dup].first));
  }

  // Four hex digits of a \u escape starting at i_.
  uint32_t hex4() {
    if (s_.size() - i_ < 4) error("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k, ++i_) {
      const char c = s_[i_];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') v |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= uint32_t(c - 'A' + 10);
      else error("invalid hex digit in \\u escape");
    }
    return v;
  }


  // Length of the valid UTF-8 sequence at i_ (lead byte >= 0x80), or 0. Rejects
  // overlong forms, encoded surrogates and code points above U+10FFFF.
  size_t utf8_length() const {
    auto at = [&](size_t k) -> unsigned { return i_ + k < s_.size() ? (unsigned char)s_[i_ + k] : 0u; };
    auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xbf) { return at(k) >= lo && at(k) <= hi; };
    const unsigned c = at(0);
    if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
    if (c == 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
    if (c == 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
    if (c >= 0xe1 && c <= 0xef) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
    return 0;
  }

  std::string string() {
    const size_t start = i_++;  // '"'
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) error_at(start, "unterminated string");
      const unsigned char c = s_[i_];
      if (c == '"') { ++i_; return out; }
      if (c < 0x20) error("raw control character ", describe(), " in string");
      if (c >= 0x80) {
        const size_t n = utf8_length();
        if (!n) error("invalid UTF-8 in string");
        out.append(s_.substr(i_, n));
        i_ += n;
        continue;
      }
      if (c != '\\') { out += char(c); ++i_; continue; }
      ++i_;
      if (i_ >= s_.size()) error_at(start, "unterminated string");
      const char e = s_[i_++];
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
          const size_t esc = i_ - 2;
          uint32_t cp = hex4();
          if (cp >= 0xdc00 && cp <= 0xdfff) error_at(esc, "lone low surrogate \\u", s_.substr(esc + 2, 4));
          if (cp >= 0xd800 && cp <= 0xdbff) {  // must be followed by \uDC00-\uDFFF
            if (s_.substr(i_, 2) != "\\u") error_at(esc, "high surrogate without a low surrogate");
            i_ += 2;
            const uint32_t lo = hex4();
            if (lo < 0xdc00 || lo > 0xdfff) error_at(esc, "high surrogate without a low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          append_utf8(out, char32_t(cp));
          break;
        }
        default: --i_; error("invalid escape: backslash followed by ", describe());
      }
    }
  }

  Json number() {
    const size_t start = i_;
    auto digits = [&] {
      const size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ - from;
    };
    if (s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;  // a leading zero stands alone: "01" is not JSON
    } else if (!digits()) {
      error("expected a digit but found ", describe());
    }
    bool integral = true;
    if (i_ < s_.size() && s_[i_] == '.') {
      integral = false;
      ++i_;
      if (!digits()) error("expected a digit after '.' but found ", describe());
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      integral = false;
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) error("expected a digit in the exponent but found ", describe());
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + i_;
    if (integral) {
      int64_t v;
      auto [p, ec] = std::from_chars(first, last, v);
      if (ec == std::errc() && p == last) return Json(v);
      // Out of int64 range: fall through and keep it as an (inexact) double.
    }
    double d;
    auto [p, ec] = std::from_chars(first, last, d);
    if (ec == std::errc::result_out_of_range) {
      // from_chars reports underflow (1e-999) like overflow; strtod tells them apart
      // (its finite result is the nearest double, 0 or a denormal). Only overflow fails.
      const double near = std::strtod(std::string(first, last).c_str(), nullptr);
      if (std::isfinite(near)) return Json(near);
      error_at(start, "number ", std::string_view(first, size_t(last - first)).substr(0, 40), " out of range");
    }
    if (ec != std::errc() || p != last) error_at(start, "invalid number");
    return Json(d);
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

Json Json::parse(std::string_view text) { return Parser(text).document(); }

std::string Json::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

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
