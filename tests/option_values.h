#pragma once
// The values of a model option (nn/model_options.h) other than the one a config has,
// for the tests that walk the table: whatever a row is, a loop over other_values()
// reaches each of its values without a list of options of its own.
#include <algorithm>
#include <string>
#include <vector>

#include "nn/model_options.h"

namespace folio::testing {

// One config per value of `option` other than c's, every other field as in c: a switch
// flipped, each other name of a choice, and a number moved up by 2 (a whole number, as
// ffn_hidden asks; a soft cap of 2 bends the logits) or, in a narrow range, halfway to
// its maximum (drop_path 0.495).
inline std::vector<nn::GPTConfig> other_values(const nn::ModelOption& option, const nn::GPTConfig& c) {
  std::vector<nn::GPTConfig> out;
  std::visit(nn::Overloaded{[&](const nn::Toggle& t) {
                              out.push_back(c);
                              out.back().*(t.at) = !(c.*(t.at));
                            },
                            [&](const nn::Number& n) {
                              out.push_back(c);
                              out.back().*(n.at) = std::min(c.*(n.at) + 2.0f, c.*(n.at) + (n.max - c.*(n.at)) / 2);
                            },
                            [&](const nn::Choice& ch) {
                              for (const std::string& name : ch.names)
                                if (name != ch.get(c)) ch.set(out.emplace_back(c), name);
                            }},
             option.value);
  return out;
}

}  // namespace folio::testing
