#pragma once
// Generative tasks scored by exact match: the model writes greedily after each prompt
// until a stop string, its token limit, or its end-of-text id; its text and the answer
// are normalised the same way and compared.
//  - normalisation: surrounding whitespace is trimmed; when the text holds GSM8K's
//    "#### N", only what follows the last "####" is kept, without commas, dollar signs
//    or a final period (lm-eval's gsm8k regexes_to_ignore: ",", "\$", "(?s).*#### ",
//    "\.$"), so "#### 1,234." and "1234" match;
//  - the prompt's tokens (after the tokenizer's prompt_start id, if any) are cut from
//    the left to the model's window; past it, the model sees the last block_size
//    tokens (the window slides a token at a time), and such an item is counted as cut.
// tests/task_scores_numpy.py generates the same text with numpy's forward pass.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"
#include "nn/transformer.h"

namespace folio {

std::string normalised_answer(std::string_view text);

struct GreedyOptions {
  int64_t max_new_tokens = 256;
  std::vector<std::string> stops;  // non-empty strings; the text ends before the first
  int64_t streams = 8;             // prompts generated side by side (one decoder step for all)
};

struct Greedy {
  std::string text;    // what the model wrote, cut before a stop string
  int64_t tokens = 0;  // tokens generated
  bool cut = false;    // the model lost some of the prompt to its window
};

// The tokens of a prompt as the model reads it (a chat model: as a user's message
// through its template, the reply to come): an Error names what the tokenizer cannot
// encode ("the prompt: ...").
std::vector<int32_t> prompt_tokens(const Tokenizer& tokenizer, const std::string& prompt);

// Greedy text after each prompt (tokens from prompt_tokens), in their order; a chat
// model's ends with its turn (<|im_end|>).
std::vector<Greedy> generate_greedy(const nn::GPT& model, const Tokenizer& tokenizer,
                                    std::span<const std::vector<int32_t>> prompts, const GreedyOptions& opt);

}  // namespace folio
