#pragma once
// An enum value from its name: the one of `values` whose to_string is `name`. Every
// option with named values (--pos, --decay, --sampling, --dtype, ...) parses through
// it, so each name is spelled once, in its enum's to_string.
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>

namespace folio {

template <class E>
std::optional<E> parse_name(std::string_view name, std::span<const E> values) {
  for (E v : values)
    if (name == to_string(v)) return v;  // found by argument-dependent lookup, in E's namespace
  return std::nullopt;
}

template <class E>
std::optional<E> parse_name(std::string_view name, std::initializer_list<E> values) {
  return parse_name(name, std::span<const E>(values.begin(), values.size()));
}

}  // namespace folio
