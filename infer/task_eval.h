#pragma once
// Multiple-choice scoring, lm-evaluation-harness's rule, in one place:
//  - each choice is the continuation " " + choice of the item's context; the two are
//    tokenized on their own (trailing whitespace of the context moves to the front of
//    the continuation first, as lm-eval's _encode_pair does), the tokenizer's
//    prompt_start id (if it has one) goes before the context, and the choice's score is
//    the summed log-probability of the continuation's tokens given what precedes them;
//  - acc:      the choice with the highest sum is the model's answer;
//  - acc_norm: the highest sum divided by the choice's length in characters (Unicode
//    code points, the leading space not counted: lm-eval's completion_len). llm.c's
//    HellaSwag divides by the continuation's tokens instead: its figures are not these;
//  - ties go to the first choice (numpy's argmax);
//  - each metric's standard error is the sample standard deviation of the 0/1 scores
//    over sqrt(n) (lm-eval's mean_stderr).
// tests/task_scores_numpy.py is an independent scorer that the tests hold this against.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "nn/transformer.h"

namespace folio {

// One choice as the model reads it: the input is context + continuation without its
// last token (at most block_size ids), and the continuation's tokens are the targets
// of its last continuation.size() positions.
struct ChoiceTokens {
  std::vector<int32_t> context;       // (n), cut from the left when the whole would not fit
  std::vector<int32_t> continuation;  // (m), 1 <= m <= block_size
  bool cut = false;                   // the context lost tokens to fit the window
};

// The tokens of `choice` after `context`, for a model whose window is `block_size`.
// When n + m - 1 > block_size the context keeps its last block_size + 1 - m tokens
// (lm-eval's (context + continuation)[-(max_length + 1):]). A continuation longer than
// the window is an Error: "the choice is N tokens, more than the model's window of T";
// so is text the tokenizer cannot encode ("the context: [tokenizer] ...", "the choice: ...").
ChoiceTokens choice_tokens(const Tokenizer& tokenizer, const std::string& context, const std::string& choice,
                           int64_t block_size);

// The summed log-probability of each row's continuation under `model` (which must be
// in eval mode: dropout off), in one forward pass over the rows padded to the longest: the
// attention is causal, so what follows a row's end changes nothing before it.
std::vector<double> continuation_logprobs(const nn::GPT& model, std::span<const ChoiceTokens> rows);

// A choice's length for acc_norm: its Unicode code points (the bytes that do not
// continue a UTF-8 character).
int64_t characters(const std::string& utf8);

struct ChoicePick {
  int64_t pred = 0;       // argmax of the sums: acc's answer
  int64_t pred_norm = 0;  // argmax of sum / characters(choice): acc_norm's
};
// The rule: which choice the model picks, from each choice's summed log-probability.
ChoicePick pick_choice(std::span<const double> logprobs, std::span<const std::string> choices);

struct Metric {
  double mean = 0;
  std::optional<double> standard_error;  // none below 2 items
};
// The mean of 0/1 scores and its standard error (sample std / sqrt(n)).
Metric mean_with_stderr(std::span<const int> scores);

}  // namespace folio
