#include "train/init_from.h"

#include <algorithm>
#include <vector>

#include "base/error.h"

namespace folio {
namespace {

// Where row r of a table indexed by token, in a vocabulary of V, goes in one of V2 > V:
// the same row, but for the bigram table, whose rows are pairs (previous * V + token,
// then V * V + token for a sequence's first token).
int64_t grown_row(const std::string& name, int64_t r, int64_t V, int64_t V2) {
  if (name != "bigram_embedding.weight") return r;
  const int64_t previous = r / V, token = r % V;  // previous == V: the first-token rows
  return (previous == V ? V2 : previous) * V2 + token;
}

// `to` (rows_to, width) from `from` (rows_from, width): the old rows where grown_row
// puts them, every other row the mean of the old ones.
void grow(const std::string& name, const Tensor& from, const Tensor& to, int64_t V, int64_t V2) {
  const int64_t rows_from = from.shape()[0], rows_to = to.shape()[0];
  const int64_t width = from.numel() / rows_from;
  if (rows_to <= rows_from || to.numel() / rows_to != width)
    fail("train", "--init-from: ", name, " has ", from.numel(), " weights in the checkpoint and ", to.numel(),
         " in the model with more tokens: not a table indexed by token");
  std::vector<double> mean(size_t(width), 0.0);
  for (int64_t r = 0; r < rows_from; ++r)
    for (int64_t i = 0; i < width; ++i) mean[size_t(i)] += from.data()[r * width + i];
  for (int64_t r = 0; r < rows_to; ++r)
    for (int64_t i = 0; i < width; ++i) to.data()[r * width + i] = float(mean[size_t(i)] / double(rows_from));
  for (int64_t r = 0; r < rows_from; ++r)
    std::copy_n(from.data() + r * width, width, to.data() + grown_row(name, r, V, V2) * width);
}

}  // namespace

InitModel model_from(const ModelCheckpoint& ck, const nn::GPTConfig& given, bool dropout_given, int64_t vocab_size) {
  nn::GPTConfig config = ck.model->config();
  config.seed = given.seed;
  if (dropout_given) config.dropout = given.dropout;
  const int64_t V = config.vocab_size;
  InitModel init;
  if (vocab_size == V) {  // the common case: the checkpoint's weights as they are
    init.model = std::make_unique<nn::GPT>(config);
    const Tensor& from = ck.model->flat_parameters();
    const Tensor& to = init.model->flat_parameters();
    std::copy(from.data(), from.data() + from.numel(), to.data());
    to.mark_modified();
    return init;
  }
  if (vocab_size != V + 1 && vocab_size != V + 2)
    fail("train", "--init-from ", ck.path, ": the data has ", vocab_size, " token ids, the checkpoint's model ", V,
         " (only an end-of-text id, or the chat template's two tokens, can be added)");
  config.vocab_size = vocab_size;
  config.validate();  // a bigram table has a largest vocabulary
  init.model = std::make_unique<nn::GPT>(config);
  const nn::NamedParameters old = ck.model->named_parameters();
  std::vector<std::string> grown;
  for (const auto& named : init.model->named_parameters()) {
    const std::string& name = named.first;  // not a structured binding: clang 14 cannot capture one
    const Tensor& to = named.second;
    const auto it = std::find_if(old.begin(), old.end(), [&](const auto& p) { return p.first == name; });
    if (it == old.end()) fail("train", "--init-from ", ck.path, ": the checkpoint has no ", name);
    const Tensor& from = it->second;
    if (from.numel() == to.numel()) {
      std::copy_n(from.data(), from.numel(), to.data());
    } else {
      grow(name, from, to, V, vocab_size);
      grown.push_back(name);
    }
  }
  init.model->flat_parameters().mark_modified();
  std::string tables;
  for (const std::string& name : grown) tables += cat(tables.empty() ? "" : ", ", name);
  const std::string added = vocab_size == V + 1
                               ? cat("end-of-text (id ", V, ", the token directory's separator between documents)")
                               : cat("the chat template's <|im_start|> and <|im_end|> (ids ", V, " and ", V + 1, ")");
  init.note = cat("vocabulary: the checkpoint's ", V, " ids and ", added, "; ", vocab_size == V + 1 ? "its" : "their",
                  " rows of ", tables, " start as the mean of the other rows");
  return init;
}

}  // namespace folio
