// Conversations as training data (data/conversations.h): rendered once, drawn a row at
// a time.
#include "data/conversations.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "data/token_shard.h"  // token_checksum, checksum_hex

namespace folio {
ChatSplitRows render_rows(const Tokenizer& tokenizer, std::span<const std::vector<ChatMessage>> conversations,
                           std::span<const int64_t> lines, const std::string& path) {
  ChatSplitRows out;
  for (size_t i = 0; i < conversations.size(); ++i) {
    RenderedChat r;
    try {
      r = render_chat(tokenizer, conversations[i], false);
    } catch (const Error& e) {
      fail("data", path, ":", lines[i], ": ", e.what());
    }
    for (size_t t = 1; t < r.ids.size(); ++t) ++(r.weights[t] ? out.trained : out.masked);
    out.flat.insert(out.flat.end(), r.ids.begin(), r.ids.end());
    out.rows.push_back(std::move(r));
    out.lines.push_back(lines[i]);
  }
  return out;
}

int64_t chat_window(size_t ids, int64_t T, int64_t stage) {
  const int64_t needed = std::max<int64_t>(1, int64_t(ids) - 1);
  return std::min(T, (needed + stage - 1) / stage * stage);
}

LengthGroups::LengthGroups(const ChatSplitRows& split, int64_t T, int64_t stage)
    : stage_(stage), begin_(size_t((T + stage - 1) / stage + 1), 0) {
  for (const RenderedChat& r : split.rows) {
    group_of_.push_back((chat_window(r.ids.size(), T, stage) + stage - 1) / stage - 1);
    ++begin_[size_t(group_of_.back() + 1)];
  }
  for (size_t g = 1; g < begin_.size(); ++g) begin_[g] += begin_[g - 1];
  sorted_.resize(group_of_.size());
  std::vector<int64_t> next(begin_.begin(), begin_.end() - 1);
  for (size_t row = 0; row < group_of_.size(); ++row) sorted_[size_t(next[size_t(group_of_[row])]++)] = int64_t(row);
}

std::span<const int64_t> LengthGroups::members(int64_t group) const {
  const int64_t begin = begin_[size_t(group)], end = begin_[size_t(group + 1)];
  return std::span(sorted_).subspan(size_t(begin), size_t(end - begin));
}

double ChatData::padding(int64_t T, int64_t stage, int64_t B, bool grouped) const {
  // windows[w]: the rows whose window is w; a row uses min(ids - 1, T) of its positions.
  std::vector<double> windows(size_t(T + 1), 0.0);
  double used = 0, grouped_positions = 0;
  for (const RenderedChat& r : train.rows) {
    const int64_t w = chat_window(r.ids.size(), T, stage);
    windows[size_t(w)] += 1;
    grouped_positions += double(w);
    used += double(std::min<int64_t>(int64_t(r.ids.size()) - 1, T));
  }
  const auto n = double(train.rows.size());
  if (n == 0) return 0.0;
  // A group's batch is padded to the group's window; an ungrouped one to the longest of
  // B draws, whose window is at most w with probability F(w)^B.
  double positions = grouped_positions;
  if (!grouped) {
    double below = 0, expected = 0, cumulative = 0;
    for (int64_t w = 1; w <= T; ++w) {
      if (windows[size_t(w)] == 0) continue;
      cumulative += windows[size_t(w)] / n;
      const double at_most = std::pow(std::min(cumulative, 1.0), double(B));
      expected += double(w) * (at_most - below);
      below = at_most;
    }
    positions = expected * n;
  }
  return positions > 0 ? 1.0 - used / positions : 0.0;
}

void ChatData::check_fits(int64_t block_size) const {
  for (const ChatSplitRows* s : {&train, &val})
    for (size_t i = 0; i < s->rows.size(); ++i)
      if (int64_t(s->rows[i].ids.size()) > block_size + 1)
        fail("data", path, ":", s->lines[i], ": the conversation has ", s->rows[i].ids.size(),
             " tokens, more than the model's context holds (block_size + 1 = ", block_size + 1,
             "): shorten it or split it into several");
}

std::string ChatData::fingerprint() const {
  uint64_t h = kChecksumStart;
  for (const ChatSplitRows* s : {&train, &val}) {
    // The counts first: rows and tokens then cannot slide from one split or row into
    // the next (and token_checksum zero-pads each part's tail) with the hash unchanged.
    const auto rows = int64_t(s->rows.size());
    h = token_checksum(&rows, sizeof rows, h);
    for (const RenderedChat& r : s->rows) {
      const auto L = int64_t(r.ids.size());
      h = token_checksum(&L, sizeof L, h);
      h = token_checksum(r.ids.data(), r.ids.size() * sizeof(int32_t), h);  // (L,)
      h = token_checksum(r.weights.data(), r.weights.size(), h);             // (L,)
    }
  }
  return checksum_hex(h);
}

ChatData render_conversations(const Tokenizer& tokenizer, std::span<const std::vector<ChatMessage>> conversations,
                              std::span<const int64_t> lines, double train_fraction, const std::string& path) {
  const size_t n = conversations.size();
  const auto n_train = size_t(double(n) * train_fraction);
  // The flag is --val-fraction, the share held out: 1 - train_fraction.
  if (n < 2)
    fail("data", path, ": ", n, " conversation", n == 1 ? "" : "s", " cannot be split into train and validation: "
         "give 2 at least (one a line), one to train on and one to validate with");
  if (n_train < 1 || n_train >= n)
    fail("data", path, ": ", n, " conversations split by --val-fraction ", 1.0 - train_fraction, " give ", n_train,
         " to train and ", n - std::min(n, n_train), " to validate: each split needs one at least; give a "
         "--val-fraction nearer 0.5 (0.5 gives ", n / 2, " and ", n - n / 2, "), or more conversations");
  ChatData d;
  d.path = path;
  d.train = render_rows(tokenizer, conversations.first(n_train), lines.first(n_train), path);
  d.val = render_rows(tokenizer, conversations.subspan(n_train), lines.subspan(n_train), path);
  return d;
}

std::string conversations_text(std::span<const std::vector<ChatMessage>> conversations) {
  std::string text = "system\nuser\nassistant\n";
  for (const std::vector<ChatMessage>& c : conversations)
    for (const ChatMessage& m : c) text += cat(m.role, "\n", m.content, "\n");
  return text;
}

namespace {

// Lays out B rows of `split`, which choose() writes into its (B,) argument, row b in
// row b of a batch sized (B, T'), T' the longest row's window; returns the padded
// positions. Both fills come through here, so B and T are checked here, before the
// rows are sized or chosen.
int64_t fill_rows(const ChatSplitRows& split, int64_t B, int64_t T, int64_t stage,
                  const std::function<void(std::span<int64_t> rows)>& choose, Batch& batch) {
  if (B < 1 || T < 1) fail("data", "batch size and block size must be positive, got B = ", B, ", T = ", T);
  std::vector<int64_t> rows(static_cast<size_t>(B));  // (B,)
  choose(rows);
  int64_t window = 1;
  for (int64_t row : rows) window = std::max(window, chat_window(split.rows[size_t(row)].ids.size(), T, stage));
  resize_batch(batch, B, window);
  int64_t padding = 0;
  for (int64_t b = 0; b < B; ++b) {
    const RenderedChat& r = split.rows[size_t(rows[size_t(b)])];
    const int64_t L = std::min<int64_t>(int64_t(r.ids.size()), window + 1);  // cut only by a --seq-warmup window
    padding += window - (L - 1);
    int32_t* x = batch.inputs.data() + b * window;   // (T',)
    int32_t* y = batch.targets.data() + b * window;  // (T',)
    for (int64_t t = 0; t < window; ++t) {
      // Padding repeats the last token: the causal mask keeps real positions from it.
      x[t] = r.ids[size_t(std::min(t, L - 1))];
      y[t] = t + 1 < L && r.weights[size_t(t + 1)] ? r.ids[size_t(t + 1)] : kMaskedTarget;
    }
  }
  return padding;
}

}  // namespace

int64_t fill_chat_batch(const ChatSplitRows& split, int64_t B, int64_t T, const std::function<int64_t(int64_t n)>& pick,
                        Batch& batch, int64_t stage) {
  const auto choose = [&](std::span<int64_t> rows) {
    for (int64_t& row : rows) row = pick(int64_t(split.rows.size()));
  };
  return fill_rows(split, B, T, stage, choose, batch);
}

int64_t fill_grouped_chat_batch(const ChatSplitRows& split, const LengthGroups& groups, int64_t B, int64_t T,
                                const std::function<int64_t(int64_t n)>& pick, Batch& batch) {
  const auto choose = [&](std::span<int64_t> rows) {
    rows[0] = pick(int64_t(split.rows.size()));
    const std::span<const int64_t> group = groups.members(groups.group_of(rows[0]));
    for (size_t b = 1; b < rows.size(); ++b) rows[b] = group[size_t(pick(int64_t(group.size())))];
  };
  return fill_rows(split, B, T, groups.stage(), choose, batch);
}

int64_t counted_targets(const Batch& batch, int64_t row_begin, int64_t row_end) {
  const auto begin = batch.targets.begin() + row_begin * batch.T, end = batch.targets.begin() + row_end * batch.T;
  return int64_t(end - begin) - std::count(begin, end, kMaskedTarget);
}

}  // namespace folio
