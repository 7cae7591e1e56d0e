#pragma once
// The names of an option table's rows, checked the same way for every table (the model
// options, nn/model_options.h; the training settings, train/settings.h): a row has a
// flag, a JSON key, a help line and a value, which may be a choice among names.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <variant>

namespace folio::testing {

// Unique flags and keys; each key is its flag with '_' for '-' (or what `renamed` says,
// for older keys); a help line; every name of a choice (a `Choice` of the table) sets a
// `Config` that gives that name back.
template <class Choice, class Config, class Rows>
void expect_names_spelled_alike(const Rows& rows, const Config& blank,
                                const std::map<std::string, std::string>& renamed = {}) {
  std::set<std::string> flags, keys;
  for (const auto& row : rows) {
    EXPECT_TRUE(flags.insert(row.flag).second) << row.flag;
    EXPECT_TRUE(keys.insert(row.key).second) << row.key;
    std::string key = row.flag;
    std::replace(key.begin(), key.end(), '-', '_');
    EXPECT_EQ(renamed.count(row.flag) ? renamed.at(row.flag) : key, row.key);
    EXPECT_GT(std::string(row.help).size(), 10u) << row.flag;
    if (const auto* choice = std::get_if<Choice>(&row.value))
      for (const std::string& name : choice->names) {
        Config c = blank;
        EXPECT_TRUE(choice->set(c, name)) << row.flag << " " << name;
        EXPECT_EQ(choice->get(c), name);
      }
  }
}

}  // namespace folio::testing
