#pragma once
// The training settings (TrainConfig's fields): one row each. Everything that names a
// setting reads this table: its default (TrainConfig()), its limits
// (TrainConfig::validate()), a run's state file (train/config_json.cpp, both ways),
// folio train's flags and a recipe's keys (cli/train_options.cpp) and folio info's
// training lines. So a new setting is its TrainConfig field, its row in settings.cpp,
// and the code that uses it.
//
// A run saved before a setting existed has no key for it and reads the row's default,
// which must then mean the run as it was (a warm-up of 0 steps, no average).
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "train/config.h"

namespace folio {

// Where a value is allowed: a lower end ("must be positive", "must be >= 0"), and above
// it a bound ("outside [0, 1)") or only a limit no sensible value reaches ("exceeds the
// limit of", for counts; for reals, finiteness). validate() and the state file's reader
// both apply it (the reader its closure), so a run never saves what it cannot read back.
struct Range {
  double lo = 0, hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  bool hi_is_limit = true;              // false: hi is part of the range, said as an interval
  const char* note = nullptr;           // what a value means, for errors: "0: off"
  const char* unit = nullptr;           // after an interval: "seconds"
  void (*also)(const TrainConfig&) = nullptr;  // what the setting asks of others; fail()s

  Range limit(double max) const;             // a count's sanity limit
  Range noting(const char* text) const;      // "(0: off)"
  Range in(const char* unit_name) const;     // "[0, 1e+09] seconds"
  Range and_also(void (*check)(const TrainConfig&)) const;
  bool holds(double v) const;
};
Range positive();                  // > 0 (a count: >= 1)
Range at_least(double lo);         // >= lo
// An interval, "(0, 1]": open or closed at each end.
Range interval(char open, double lo, double hi, char close);

// A number stored as is: a count (int64_t), a float or a double. JSON: a number.
template <class T>
struct Number {
  T TrainConfig::* at;
  T initial;  // the default
  Range range;
  // The flag and folio info give 1 - the value: --val-fraction 0.1 is train_fraction 0.9.
  bool flag_gives_rest = false;
};
using Count = Number<int64_t>;
using Real = Number<float>;
using Real64 = Number<double>;

// A 64-bit seed. JSON: a decimal string (JSON numbers lose bits past 2^53).
struct Seed {
  uint64_t TrainConfig::* at;
  uint64_t initial;
};

// Free text (a path, a tokenizer's name). JSON: a string.
struct Text {
  std::string TrainConfig::* at;
  const char* initial;
};

// One of a few names. JSON: a string.
struct Choice {
  std::vector<std::string> names;  // what a run saves
  std::string initial;
  std::function<std::string(const TrainConfig&)> get;
  std::function<bool(TrainConfig&, std::string_view)> set;  // false, and nothing set, for an unknown name
  // Names the flag also takes, which set() turns into one of `names` ("auto").
  std::vector<std::string> flag_only = {};
};

// What --resume does with a setting given on its command line.
enum class OnResume {
  fixed,     // part of the model or its optimizer: it may be repeated, not changed
  override,  // replaces the saved value
  always,    // not saved with the run (where to write, output): the command line's own options
};

// The line of folio info's that lists a setting, and when (null: always).
enum class Line { none, training, optimizer, evaluation };
struct Listed {
  Listed(Line line, bool (*when)(const TrainConfig&) = nullptr) : line(line), when(when) {}
  Line line;
  bool (*when)(const TrainConfig&);
};

// A state file without the setting's key: saved before the setting existed (read as
// its default), or damaged (every run has saved it).
enum class Absent { the_default, refused };

// How folio train's flag comes about.
enum class FlagKind {
  own,              // declared from the row
  from_init,        // declared from the row; a run started --init-from takes the checkpoint's
  every_command,    // --threads: every command's flag (cli/common.h); the trainer records it
};

struct TrainSetting {
  const char* flag;  // folio train's flag without its dashes, a recipe's key: "seq-warmup"
  const char* key;   // the state file's JSON key: "seq_warmup"
  const char* help;
  std::variant<Count, Real, Real64, Seed, Text, Choice> value;
  OnResume on_resume;
  Listed listed;
  Absent absent = Absent::the_default;
  FlagKind flag_kind = FlagKind::own;
};

// Every setting, in folio info's order (and so --help's).
const std::vector<TrainSetting>& train_settings();

// fail("config", ...) unless the setting's value is in its range ("seq_warmup must be
// >= 0, got -1"). Its also-check is validate()'s: it reads other settings.
void check_range(const TrainSetting& setting, const TrainConfig& c);

// A number's range; null for the kinds that hold any value they can parse.
const Range* range_of(const TrainSetting& setting);

// "(0, 1)", "[0, 1e+09]": the range as an interval, for messages.
std::string range_text(const Range& range);

// The value to its default.
void reset(const TrainSetting& setting, TrainConfig& c);

// "random or epoch", or with quote = '"': "\"random\" or \"epoch\"" (the flag-only
// names too when asked).
std::string names_list(const Choice& choice, char quote = 0, bool with_flag_only = false);

}  // namespace folio
