#include "train/same_on_every_rank.h"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "base/error.h"
#include "data/hash.h"
#include "train/config_json.h"
#include "train/distributed.h"
#include "train/settings.h"
#include "train/trainer.h"

namespace folio {
namespace {

// FNV-1a 64 (data/hash.h), cut to 53 bits: a double holds it exactly, for
// dist::same_everywhere.
double hash_of(std::string_view text) { return double(fnv1a64(text) >> 11); }

// Rank 0's text, on every rank.
std::string root_text(const std::string& mine) {
  uint64_t size = mine.size();
  dist::broadcast(std::span(&size, 1));
  std::vector<uint64_t> packed((size + 7) / 8);  // (ceil(size / 8),) the bytes, 8 a word
  if (dist::is_root()) std::memcpy(packed.data(), mine.data(), mine.size());
  dist::broadcast(std::span(packed));
  return std::string(reinterpret_cast<const char*>(packed.data()), size_t(size));
}

// As the flag was given: 0.001, not the double 0.0010000000474974513 that JSON holds of
// the float.
std::string float_text(float v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

std::string clipped(const std::string& value) { return value.size() > 200 ? value.substr(0, 200) + "..." : value; }

}  // namespace

void check_same_on_every_rank(const std::vector<std::pair<std::string, std::string>>& named) {
  if (dist::size() == 1) return;
  for (const auto& [name, value] : named) {
    if (dist::same_everywhere(hash_of(value))) continue;
    const std::string root = root_text(value);
    fail("mpi", "the ranks were not given the same run: ", name, " is ", clipped(root), " on rank 0",
         dist::is_root() ? std::string(" and differs on another rank")
                         : cat(" but ", clipped(value), " here (rank ", dist::rank(), ")"),
         "; every rank must run the same folio train options on the same data (a command line, recipe or data "
         "file that differs between the ranks' hosts?)");
  }
}

std::vector<std::pair<std::string, std::string>> options_to_share(const TrainOptions& o) {
  std::vector<std::pair<std::string, std::string>> named{
      {"--resume", o.resume ? "given" : "not given"},
      {"--overlap", o.overlap ? "on" : "off"},
      {"--detect-anomaly", o.detect_anomaly ? "given" : "not given"}};
  const Json values = to_json(o.train);  // one member a setting, in train_settings()' order
  const std::vector<TrainSetting>& settings = train_settings();
  for (size_t i = 0; i < settings.size(); ++i) {
    const std::string_view flag = settings[i].flag;
    if (flag == "data" || flag == "init-from" || flag == "config" || flag == "threads" || flag == "log-interval")
      continue;
    const Json& value = values.as_object()[i].second;
    named.emplace_back(cat("--", flag), value.type() == Json::Type::Double ? float_text(float(value.as_double())) : value.dump());
  }
  return named;
}

}  // namespace folio
