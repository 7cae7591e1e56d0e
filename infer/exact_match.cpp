// Generative tasks by exact match (infer/exact_match.h).
#include "infer/exact_match.h"

#include <algorithm>

#include "autograd/parallel.h"
#include "base/error.h"
#include "base/rng.h"
#include "data/chat_template.h"
#include "infer/generator.h"

namespace folio {
namespace {

std::string_view trimmed(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\n\r\f\v");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\n\r\f\v") + 1 - first);
}

}  // namespace

std::string normalised_answer(std::string_view text) {
  const size_t hashes = text.rfind("####");
  if (hashes == std::string_view::npos) return std::string(trimmed(text));
  std::string out;
  for (char c : trimmed(text.substr(hashes + 4)))
    if (c != ',' && c != '$') out += c;
  if (!out.empty() && out.back() == '.') out.pop_back();
  return std::string(trimmed(out));
}

std::vector<int32_t> prompt_tokens(const Tokenizer& tokenizer, const std::string& prompt) {
  std::vector<int32_t> ids;
  try {
    if (tokenizer.chat_tokens()) {  // a chat model is asked in a conversation: a user's turn
      const ChatMessage user{"user", prompt};
      return chat_prompt_for(tokenizer, std::span(&user, 1)).ids;
    }
    if (const auto start = tokenizer.prompt_start()) ids.push_back(*start);
    const std::vector<int32_t> text = tokenizer.encode(prompt);
    ids.insert(ids.end(), text.begin(), text.end());
  } catch (const Error& e) {
    throw Error(cat("the prompt: ", e.what()));
  }
  if (ids.empty()) throw Error("the prompt has no tokens");
  return ids;
}

std::vector<Greedy> generate_greedy(const nn::GPT& model, const Tokenizer& tokenizer,
                                    std::span<const std::vector<int32_t>> prompts, const GreedyOptions& opt) {
  SampleOptions so;
  so.greedy = true;
  so.max_new_tokens = opt.max_new_tokens;
  so.context_shift = 1;  // past the window the model sees its last block_size tokens, as lm-eval's left cut
  Rng rng(0);            // greedy draws nothing
  const int64_t streams = std::max<int64_t>(1, std::min<int64_t>(opt.streams, int64_t(prompts.size())));
  infer::Generator generator(model, streams);
  generator.set_decode_threads(num_threads());
  const int64_t T = model.config().block_size;
  const std::optional<int32_t> end = tokenizer.end_of_text();
  const std::optional<ChatTokens> turn = tokenizer.chat_tokens();  // a chat model's reply ends with its turn
  std::vector<Greedy> out(prompts.size());
  std::vector<int64_t> item_of(size_t(streams), -1);  // (streams) the prompt each stream writes after, -1: idle
  size_t next = 0;
  auto close = [&](int64_t stream, bool stopped) {
    Greedy& g = out[size_t(item_of[size_t(stream)])];
    const infer::Generator::Token rest = generator.finish(stream);
    if (!stopped) g.text += rest.text;
    g.cut = int64_t(prompts[size_t(item_of[size_t(stream)])].size()) + g.tokens - 1 > T;
    item_of[size_t(stream)] = -1;
  };
  auto fill = [&] {
    for (int64_t s = 0; s < streams && next < prompts.size(); ++s) {
      if (item_of[size_t(s)] >= 0) continue;
      item_of[size_t(s)] = int64_t(next);
      generator.start(s, prompts[next++], so, rng, &tokenizer, opt.stops);
      if (opt.max_new_tokens == 0) close(s, false);
    }
  };
  std::vector<int64_t> active;  // (active) the streams of one step
  for (fill();; fill()) {
    active.clear();
    for (int64_t s = 0; s < streams; ++s)
      if (item_of[size_t(s)] >= 0) active.push_back(s);
    if (active.empty()) break;
    const std::span<const float> rows = generator.logits(active);  // (active, V)
    const int64_t V = model.config().vocab_size;
    for (size_t b = 0; b < active.size(); ++b) {
      const int64_t s = active[b];
      const infer::Generator::Token token = generator.sample(s, rows.subspan(b * size_t(V), size_t(V)));
      Greedy& g = out[size_t(item_of[size_t(s)])];
      ++g.tokens;
      if ((end && token.id == *end) || (turn && token.id == turn->end)) {
        close(s, false);
        continue;
      }
      g.text += token.text;
      if (token.stopped || g.tokens >= opt.max_new_tokens) close(s, token.stopped);
    }
  }
  return out;
}

}  // namespace folio
