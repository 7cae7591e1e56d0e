// lm-eval's multiple-choice rule (infer/task_eval.h).
#include "infer/task_eval.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace folio {

ChoiceTokens choice_tokens(const Tokenizer& tokenizer, const std::string& context, const std::string& choice,
                           int64_t block_size) {
  // lm-eval moves the context's trailing whitespace onto the continuation: a context
  // "Answer: " is read as "Answer:" followed by "  x", not as text ending in a lone
  // space, which a subword model seldom saw at the end of a word.
  const size_t kept = context.find_last_not_of(" \t\n\r\f\v") + 1;  // 0 when all whitespace
  ChoiceTokens out;
  if (const auto start = tokenizer.prompt_start()) out.context.push_back(*start);
  try {
    const std::vector<int32_t> ctx = tokenizer.encode(std::string_view(context).substr(0, kept));
    out.context.insert(out.context.end(), ctx.begin(), ctx.end());
  } catch (const Error& e) {
    throw Error(cat("the context: ", e.what()));
  }
  try {
    out.continuation = tokenizer.encode(context.substr(kept) + " " + choice);
  } catch (const Error& e) {
    throw Error(cat("the choice: ", e.what()));
  }
  const int64_t n = int64_t(out.context.size()), m = int64_t(out.continuation.size());
  if (m > block_size)
    throw Error(cat("the choice is ", m, " tokens, more than the model's window of ", block_size));
  if (n == 0) throw Error("the context has no tokens (it is only whitespace)");
  if (n + m - 1 > block_size) {
    out.context.erase(out.context.begin(), out.context.begin() + (n - (block_size + 1 - m)));
    out.cut = true;
  }
  return out;
}

std::vector<double> continuation_logprobs(const nn::GPT& model, std::span<const ChoiceTokens> rows) {
  const int64_t B = int64_t(rows.size());
  int64_t T = 1;
  for (const ChoiceTokens& r : rows) T = std::max<int64_t>(T, int64_t(r.context.size() + r.continuation.size()) - 1);
  std::vector<int32_t> ids(size_t(B * T), 0);  // (B, T), each row padded after its end with id 0
  for (int64_t b = 0; b < B; ++b) {
    const ChoiceTokens& r = rows[size_t(b)];
    int32_t* row = ids.data() + b * T;
    std::copy(r.context.begin(), r.context.end(), row);
    std::copy(r.continuation.begin(), r.continuation.end() - 1, row + r.context.size());
  }
  NoGradGuard no_grad;
  const Tensor logits = model.forward(ids, B, T).logits;  // (B, T, V)
  const int64_t V = logits.shape().last();
  std::vector<double> sums(size_t(B), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    const ChoiceTokens& r = rows[size_t(b)];
    const int64_t n = int64_t(r.context.size());
    for (size_t k = 0; k < r.continuation.size(); ++k) {
      const float* z = logits.data() + (b * T + n - 1 + int64_t(k)) * V;  // (V) predicts continuation[k]
      const double mx = *std::max_element(z, z + V);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v]) - mx);
      sums[size_t(b)] += double(z[r.continuation[k]]) - mx - std::log(sum);
    }
  }
  return sums;
}

int64_t characters(const std::string& utf8) {
  int64_t n = 0;
  for (unsigned char c : utf8) n += (c & 0xC0) != 0x80;
  return n;
}

ChoicePick pick_choice(std::span<const double> logprobs, std::span<const std::string> choices) {
  if (logprobs.size() != choices.size() || choices.empty())
    fail("task_eval", logprobs.size(), " scores for ", choices.size(), " choices");
  ChoicePick pick;
  double best_norm = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const double norm = logprobs[i] / double(characters(choices[i]));
    if (logprobs[i] > logprobs[size_t(pick.pred)]) pick.pred = int64_t(i);  // strictly: a tie keeps the first
    if (i == 0 || norm > best_norm) pick.pred_norm = int64_t(i), best_norm = norm;
  }
  return pick;
}

Metric mean_with_stderr(std::span<const int> scores) {
  Metric m;
  const double n = double(scores.size());
  if (scores.empty()) return m;
  for (int s : scores) m.mean += double(s);
  m.mean /= n;
  if (scores.size() < 2) return m;
  double squares = 0;
  for (int s : scores) squares += (double(s) - m.mean) * (double(s) - m.mean);
  m.standard_error = std::sqrt(squares / (n - 1.0)) / std::sqrt(n);
  return m;
}

}  // namespace folio
