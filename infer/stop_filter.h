#pragma once
// Stop strings over streamed text: text is passed on as soon as it cannot be the start
// of a stop string, so a client never receives part of one, and nothing after one.
#include <string>
#include <string_view>
#include <vector>

namespace folio::infer {

class StopFilter {
 public:
  explicit StopFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Adds generated text (whole UTF-8 characters) and returns what may be sent now.
  // Once a stop string appears, returns the text before it and matched() turns true.
  std::string push(std::string_view text);
  // The text held back at the end, when no stop string came.
  std::string flush();
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;  // non-empty, valid UTF-8
  std::string held_;  // unsent text: the longest tail that is a stop string's beginning
  bool matched_ = false;
};

}  // namespace folio::infer
