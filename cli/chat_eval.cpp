// folio eval on conversations (cli/chat_eval.h): every conversation of the chosen split
// is one row, and the loss is the mean over the targets the template weighs 1 (the
// assistant's content and its <|im_end|>), summed exactly over rows and batches.
#include "cli/chat_eval.h"

#include <cstdio>

#include "autograd/tensor.h"
#include "data/conversations.h"
#include "io/conversation_file.h"
#include "io/json.h"
#include "nn/weights.h"

namespace folio::cli {

std::function<int()> prepare_chat_eval(const po::variables_map& vm, std::shared_ptr<ModelCheckpoint> ck,
                                       const std::string& path, double val_fraction) {
  const std::string split = vm["split"].as<std::string>();
  if (split != "val" && split != "train" && split != "all")
    throw UsageError(cat("--split must be val, train or all, got '", split, "'"));
  // The text evaluation's windows and stored weights have no meaning here: every
  // conversation of the split is a row of the f32 forward pass. Refused rather than
  // ignored, so a figure is never shown as what it is not.
  if (vm.count("max-windows") && vm["max-windows"].as<int64_t>() != 0)
    throw UsageError(cat("--max-windows counts a text's windows; ", path, " is conversations, each scored whole "
                         "(--split chooses which)"));
  if (vm.count("weights") && nn::parse_weights(vm["weights"].as<std::string>()) != nn::Weights::f32)
    throw UsageError(cat("--weights ", vm["weights"].as<std::string>(), " applies to a text's loss; the loss over ",
                         path, "'s conversations is computed with the model's f32 weights"));
  if (!ck->tokenizer->chat_tokens())
    throw UsageError(cat(ck->path, " is a base model, without the chat template's tokens: the loss over a "
                         "conversation's assistant tokens is a chat model's (fine-tune it on ", path, " first)"));
  const int64_t batch = positive<int64_t>(vm, "batch-size");
  const bool json = vm["json"].as<bool>();
  auto rows = std::make_shared<ChatSplitRows>();
  try {
    const std::vector<Conversation> read = read_conversations(path);
    std::vector<std::vector<ChatMessage>> conversations;
    std::vector<int64_t> lines;
    for (const Conversation& c : read) conversations.push_back(c.messages), lines.push_back(c.line);
    const auto n = int64_t(conversations.size()), n_train = int64_t(double(n) * (1.0 - val_fraction));
    const int64_t begin = split == "val" ? n_train : 0, end = split == "train" ? n_train : n;
    if (begin >= end) throw Error(cat(path, ": the ", split, " split of ", n, " conversations is empty"));
    *rows = render_rows(*ck->tokenizer, std::span(conversations).subspan(size_t(begin), size_t(end - begin)),
                        std::span(lines).subspan(size_t(begin), size_t(end - begin)), path);
    ChatData fits;
    fits.path = path, fits.val = *rows;
    fits.check_fits(ck->model->config().block_size);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  return [=] {
    NoGradGuard no_grad;
    ck->model->eval();
    const int64_t n = int64_t(rows->rows.size());
    double nats = 0;  // summed over every counted target
    Batch b;
    int64_t next = 0;
    for (int64_t at = 0; at < n; at += batch) {
      const int64_t B = std::min(batch, n - at);
      // Padded to its longest row, as a training batch is: no position past it is computed.
      fill_chat_batch(*rows, B, ck->model->config().block_size, [&](int64_t) { return next++; }, b);
      const int64_t counted = counted_targets(b, 0, B);
      if (counted) nats += double(ck->model->forward(b.inputs, B, b.T, b.targets).loss.item()) * double(counted);
    }
    const double loss = nats / double(std::max<int64_t>(rows->trained, 1));
    if (json) {
      const Json out = Json::Object{{"checkpoint", ck->path}, {"step", ck->step},       {"data", path},
                                    {"split", split},         {"conversations", n},     {"tokens", rows->trained},
                                    {"masked", rows->masked}, {"loss", loss},           {"perplexity", std::exp(loss)}};
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf("%s (step %lld) on %s, %s split: %s\n", ck->path.c_str(), (long long)ck->step, path.c_str(),
                  split.c_str(), plural(n, "conversation").c_str());
      std::printf("loss %.6f  perplexity %.3f  (over %lld assistant tokens; %lld prompt and template tokens masked)\n",
                  loss, std::exp(loss), (long long)rows->trained, (long long)rows->masked);
    }
    return 0;
  };
}

}  // namespace folio::cli
