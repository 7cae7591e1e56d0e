// Conversations as a run's data (train/chat_data.h).
#include "train/chat_data.h"

#include <cmath>
#include <filesystem>

#include "base/error.h"
#include "base/number_text.h"
#include "data/conversations.h"
#include "io/conversation_file.h"
#include "train/size_warmups.h"

namespace folio {
namespace {

TrainingData open_conversations(const std::string& path, double train_fraction,
                                const std::function<std::shared_ptr<const Tokenizer>(const std::string&)>& tokenizer_for) {
  const std::vector<Conversation> read = read_conversations(path);
  std::vector<std::vector<ChatMessage>> conversations;
  std::vector<int64_t> lines;
  for (const Conversation& c : read) conversations.push_back(c.messages), lines.push_back(c.line);
  std::shared_ptr<const Tokenizer> tokenizer = tokenizer_for(conversations_text(conversations));
  auto chat = std::make_shared<const ChatData>(
      render_conversations(*tokenizer, conversations, lines, train_fraction, path));
  return TrainingData::from(std::make_shared<const ConversationTokens>(std::move(tokenizer), std::move(chat)));
}

}  // namespace

TrainingData open_training_data(const std::string& path, double train_fraction, const TokenizerSpec& spec) {
  if (!is_conversation_file(path)) return TrainingData::open(path, train_fraction, spec);
  return open_conversations(path, train_fraction, [&](const std::string& text) {
    return std::shared_ptr<const Tokenizer>(with_chat_tokens(*make_tokenizer(spec, text)));
  });
}

TrainingData open_training_data(const std::string& path, double train_fraction,
                                std::shared_ptr<const Tokenizer> tokenizer, const std::string& checkpoint,
                                bool may_grow) {
  if (!is_conversation_file(path))
    return TrainingData::open(path, train_fraction, std::move(tokenizer), checkpoint, may_grow);
  if (!tokenizer->chat_tokens() && !may_grow)
    fail("data", path, ": conversations need the chat template's tokens, which ", checkpoint,
         "'s tokenizer lacks: start a run --init-from it to add them");
  return open_conversations(path, train_fraction, [&](const std::string&) {
    return tokenizer->chat_tokens() ? tokenizer : std::shared_ptr<const Tokenizer>(with_chat_tokens(*tokenizer));
  });
}

void check_windows(const TrainingData& data, int64_t block_size) {
  if (data.chat) return data.chat->check_fits(block_size);
  for (auto [name, tokens] : {std::pair{"train", &data.train}, std::pair{"val", &data.val}})
    if (tokens->size() < block_size + 1)
      fail("data", data.path, ": the ", name, " split has ", tokens->size(),
           " tokens, needs at least block_size + 1 = ", block_size + 1);
}

bool same_data_path(const std::string& a, const std::string& b) {
  std::error_code ec;
  return a == b || std::filesystem::equivalent(a, b, ec);
}

DataPathKind data_path_kind(const std::string& path) {
  if (is_conversation_file(path)) return DataPathKind::conversations;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return DataPathKind::token_directory;
  return std::filesystem::exists(path, ec) ? DataPathKind::text : DataPathKind::missing;
}

std::string check_resumed_data(const TrainingData& data, const std::string& recorded, const std::string& recorded_path,
                               const std::string& model_file) {
  const bool text = data.kind == "text";
  const char* what = data.chat ? "conversations" : text ? "text" : "tokens";
  // Was the run's --data of this kind (conversations or a text)? Its path says: a text
  // is neither conversations nor a directory (nor, moved away, anything at all).
  const DataPathKind recorded_kind = data_path_kind(recorded_path);
  const bool text_recorded = recorded_kind == DataPathKind::text || recorded_kind == DataPathKind::missing;
  const bool same_kind = data.chat ? recorded_kind == DataPathKind::conversations : text && text_recorded;
  // Another text is other data, which --resume allows (with folio train's warning that
  // best.safetensors was chosen on another val split): only the run's own is compared.
  if (text && same_kind && !same_data_path(data.path, recorded_path)) return "";
  // A state saved before texts and conversations had a fingerprint records "" for them:
  // nothing to compare, so it resumes with a warning, and its next save records the
  // fingerprint, which later resumes check. Met with other kinds of data, "" is refused
  // below as any other fingerprint is.
  if (same_kind && recorded.empty())
    return cat(data.path, ": the run's state records no fingerprint of the ", what, " it trained on (an older folio "
               "saved it), so this file cannot be checked against ", data.chat ? "them" : "it",
               "; the run's next save records this file's");
  if (data.fingerprint == recorded) return "";
  auto described = [](const std::string& f) { return f.empty() ? std::string("none recorded") : f; };
  fail("data", data.path, ": its ", what, text ? " is not the one" : " are not the ones",
       " this run trained on (fingerprint ", described(data.fingerprint), ", the run's ", described(recorded),
       "): resume with the run's data, or start a new run (--init-from ", model_file, ")");
}

float batch_share(const TrainingData& data, const Batch& batch, int64_t b0, int64_t b1) {
  if (!data.chat) return float(b1 - b0) / float(batch.B);
  const int64_t all = counted_targets(batch, 0, batch.B);
  return all ? float(counted_targets(batch, b0, b1)) / float(all) : 0.0f;
}

ChatBatches::ChatBatches(std::shared_ptr<const ChatData> chat, int64_t block_size, Sampling sampling)
    : chat_(std::move(chat)), block_size_(block_size), stage_(seq_warmup_stage(block_size)) {
  if (sampling == Sampling::random) groups_.emplace(chat_->train, block_size_, stage_);
}

void ChatBatches::next(BatchSampler& sampler, int64_t B, int64_t T, Batch& batch) {
  const auto pick = [&](int64_t n) { return sampler.next_index(n); };
  padding_ += groups_ ? fill_grouped_chat_batch(chat_->train, *groups_, B, T, pick, batch)
                      : fill_chat_batch(chat_->train, B, T, pick, batch, stage_);
  counted_ += counted_targets(batch, 0, B);
  positions_ += B * batch.T;
}

void ChatBatches::evaluation(const ChatSplitRows& split, int64_t B, Rng& rng, Batch& batch) const {
  fill_chat_batch(split, B, block_size_, [&](int64_t n) { return int64_t(rng.below(uint64_t(n))); }, batch, stage_);
}

std::string ChatBatches::describe(int64_t B) const {
  const ChatData& c = *chat_;
  const int64_t targets = c.train.trained + c.train.masked;
  return cat("conversations: ", c.train.rows.size(), " train / ", c.val.rows.size(),
             " val, one a row; the loss counts ", c.train.trained, " of the train split's ", targets, " targets (",
             std::lround(100.0 * double(c.train.trained) / double(std::max<int64_t>(targets, 1))), "%), masks ",
             c.train.masked, "; a batch is padded to its longest row (a multiple of ", stage_, ", at most block_size ",
             block_size_, ")", groups_ ? ", its rows of similar length" : "", ": padding about ",
             std::lround(100.0 * c.padding(block_size_, stage_, B, groups_.has_value())), "% of its positions (",
             std::lround(100.0 * c.padding(block_size_, block_size_, 1, false)), "% padded to block_size)");
}

std::string ChatBatches::summary() const {
  return cat("conversations: the loss counted ", counted_, " targets of this run's ", positions_,
             " positions; the other ", positions_ - counted_, " (prompts, template, padding) were masked, ", padding_,
             " of them padding (", std::lround(100.0 * double(padding_) / double(std::max<int64_t>(positions_, 1))),
             "%)");
}

}  // namespace folio
