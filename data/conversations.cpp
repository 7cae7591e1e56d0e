// Conversations as training data (data/conversations.h): rendered once, drawn a row at
// a time.
#include "data/conversations.h"

#include <algorithm>

#include "base/error.h"

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

double ChatData::padding(int64_t block_size) const {
  int64_t used = 0;
  for (const RenderedChat& r : train.rows) used += std::min<int64_t>(int64_t(r.ids.size()) - 1, block_size);
  const double all = double(block_size) * double(train.rows.size());
  return all > 0 ? 1.0 - double(used) / all : 0.0;
}

void ChatData::check_fits(int64_t block_size) const {
  for (const ChatSplitRows* s : {&train, &val})
    for (size_t i = 0; i < s->rows.size(); ++i)
      if (int64_t(s->rows[i].ids.size()) > block_size + 1)
        fail("data", path, ":", s->lines[i], ": the conversation has ", s->rows[i].ids.size(),
             " tokens, more than the model's context holds (block_size + 1 = ", block_size + 1,
             "): shorten it or split it into several");
}

ChatData render_conversations(const Tokenizer& tokenizer, std::span<const std::vector<ChatMessage>> conversations,
                              std::span<const int64_t> lines, double train_fraction, const std::string& path) {
  const size_t n = conversations.size();
  const auto n_train = size_t(double(n) * train_fraction);
  if (n_train < 1 || n_train >= n)
    fail("data", path, ": ", n, " conversations split at --train-fraction ", train_fraction, " give ", n_train,
         " to train and ", n - std::min(n, n_train), " to validate: each split needs one at least");
  ChatData d;
  d.path = path;
  d.train = render_rows(tokenizer, conversations.first(n_train), lines.first(n_train), path);
  d.val = render_rows(tokenizer, conversations.subspan(n_train), lines.subspan(n_train), path);
  return d;
}

std::string conversations_text(std::span<const std::vector<ChatMessage>> conversations) {
  std::string text;
  for (const std::vector<ChatMessage>& c : conversations)
    for (const ChatMessage& m : c) text += cat(m.role, "\n", m.content, "\n");
  return text;
}

void fill_chat_batch(const ChatSplitRows& split, int64_t B, int64_t T, const std::function<int64_t(int64_t n)>& pick,
                     Batch& batch) {
  resize_batch(batch, B, T);
  const auto n = int64_t(split.rows.size());
  for (int64_t b = 0; b < B; ++b) {
    const RenderedChat& r = split.rows[size_t(pick(n))];
    const int64_t L = std::min<int64_t>(int64_t(r.ids.size()), T + 1);  // cut only by a --seq-warmup window
    int32_t* x = batch.inputs.data() + b * T;   // (T,)
    int32_t* y = batch.targets.data() + b * T;  // (T,)
    for (int64_t t = 0; t < T; ++t) {
      // Padding repeats the last token: the causal mask keeps real positions from it.
      x[t] = r.ids[size_t(std::min(t, L - 1))];
      y[t] = t + 1 < L && r.weights[size_t(t + 1)] ? r.ids[size_t(t + 1)] : kMaskedTarget;
    }
  }
}

int64_t counted_targets(const Batch& batch, int64_t row_begin, int64_t row_end) {
  const auto begin = batch.targets.begin() + row_begin * batch.T, end = batch.targets.begin() + row_end * batch.T;
  return int64_t(end - begin) - std::count(begin, end, kMaskedTarget);
}

}  // namespace folio
