// folio info: what a checkpoint holds (model, tokenizer, training state), and its
// tokenizer written out as a file of its own.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli/common.h"
#include "cli/train_options.h"
#include "data/dataset.h"
#include "io/checkpoint.h"
#include "io/hf_gpt2.h"
#include "nn/model_options.h"
#include "train/chat_data.h"
#include "train/run_state.h"

namespace folio::cli {
namespace {

// The largest vocabulary folio info lists whole.
constexpr int kListedVocabulary = 256;

void declare_info(po::options_description& opts) {
  add_checkpoint(opts);
  opts.add_options()("export-tokenizer", po::value<std::string>(),
                     "write the checkpoint's SentencePiece model to this file (a standard .model, as spm_encode "
                     "and python3-sentencepiece load); a chat model's holds <|im_start|> and <|im_end|> at its ids");
  add_overwrite(opts);
}

// The --tokenizer and --vocab-size that describe the checkpoint's tokenizer. A run
// saves the flags it was given; one that took its tokenizer from a token directory or
// an --init-from checkpoint was given none, and the defaults it saved (char, 0) would
// contradict the tokenizer line above: the tokenizer's own flags are shown then, with
// where it came from.
std::string tokenizer_flags(const TrainConfig& t, const Tokenizer& tok, bool token_dir) {
  const TokenizerSpec saved{t.tokenizer, t.vocab_size};
  if (!is_tokenizer_method(saved.name) || spec_describes(saved, tok))  // a file: as given
    return cat("--tokenizer ", shown(saved.name), " --vocab-size ", saved.vocab_size);
  const char* from = !t.init_from.empty() ? "the --init-from checkpoint's" : token_dir ? "the token directory's" : "the run's";
  const std::optional<TokenizerSpec> flags = tok.as_flags();
  if (!flags) {
    // No flags make it (a SentencePiece model of another type, any chat model's): the
    // export is pointed at only where there is a file to write, a question answered
    // without building the file.
    if (tok.has_model_file()) return cat("(", from, " SentencePiece model; folio info --export-tokenizer writes it as a file)");
    return cat("(", from, " tokenizer, which no flags make)");
  }
  return cat("--tokenizer ", flags->name, " --vocab-size ", flags->vocab_size, " (", from, ")");
}

// Why --export-tokenizer has no file to write for `ck`'s tokenizer, and what there is
// instead, by kind. `path` is the checkpoint as the user named it.
std::string why_no_file(const CheckpointHeader& ck, const std::string& path) {
  const Tokenizer& tok = *ck.tokenizer;
  const std::string kind = tok.kind();
  if (kind == "char")
    return tok.vocab_size() <= kListedVocabulary
               ? std::string("which has no file format of its own (folio info lists its characters)")
               : cat("which has no file format of its own (its ids are the characters of the text it was trained "
                     "on; folio tokens --checkpoint ", path, " --text T shows the id of each character of T)");
  if (kind == "ids")
    return "which has no file to write: it holds only the vocabulary size of token files made elsewhere, whose "
           "tokenizer is the one that made them";
  if (kind == "bytebpe") {
    const std::string what = "GPT-2's byte-level BPE, whose vocabulary and merges the checkpoint carries; "
                             "--export-tokenizer writes a SentencePiece .model, which cannot hold them: ";
    if (!tok.chat_tokens() && hf_refusals(ck.config).empty())
      return what + cat("folio export --format hf ", path, " DIR writes them as DIR/vocab.json and DIR/merges.txt, "
                        "with the weights");
    return what + cat("folio export --format hf writes them (vocab.json, merges.txt) only with a model HF's GPT-2 "
                      "holds, which this one is not (folio export --format hf ", path, " DIR says why); the files "
                      "the tokenizer came from (vocab.json and merges.txt, or a .tiktoken) are them");
  }
  return "which has no file format of its own";
}

// A run directory's best.safetensors: its path and step.
struct BestCheckpoint {
  std::string path;
  int64_t step = 0;
};

void print_info(const CheckpointHeader& ck, const std::optional<TrainState>& state,
                const std::optional<BestCheckpoint>& best) {
  const nn::GPTConfig& c = ck.config;
  std::printf("checkpoint   %s\n", ck.path.c_str());
  std::printf("model        %lld layers, %lld heads, n_embd %lld, block_size %lld, dropout %s, bias %s, %s\n",
              (long long)c.n_layer, (long long)c.n_head, (long long)c.n_embd, (long long)c.block_size,
              shown(c.dropout).c_str(), c.bias ? "on" : "off", nn::to_string(c.activation));
  std::printf("options      %s\n", nn::options_as_flags(c).c_str());  // as the flags that give them
  std::printf("parameters   %lld\n", (long long)c.parameter_count());
  const Tokenizer& tok = *ck.tokenizer;
  std::printf("tokenizer    %s, fingerprint %s\n", tok.describe().c_str(), tok.fingerprint().c_str());
  if (tok.vocab_size() <= kListedVocabulary) {  // a short vocabulary (characters) is worth seeing whole
    std::string tokens;
    for (int32_t id = 0; id < tok.vocab_size(); ++id)  // end-of-text has no text: named, not left blank
      tokens += cat(id ? " " : "", id == tok.end_of_text() ? "<end-of-text>" : visible_token(tok.token_bytes(id)));
    std::printf("vocabulary   %s\n", tokens.c_str());
  }
  std::printf("step         %lld\n", (long long)ck.step);
  // The state's best_val_loss is the val loss best.safetensors was saved for: the
  // trainer writes both in the same commit (io/run_dir.h).
  if (best) {
    std::printf("best         step %lld", (long long)best->step);
    if (state) std::printf(", val loss %.4f", state->best_val_loss);
    std::printf(" (%s)\n", best->path.c_str());
  }
  if (!state) return;
  const TrainConfig& t = state->config;
  std::printf("best val     %.4f\n", state->best_val_loss);
  if (!t.recipe.empty()) std::printf("recipe       --config %s\n", shown(t.recipe).c_str());
  if (!t.init_from.empty()) std::printf("started from --init-from %s\n", shown(t.init_from).c_str());
  // The run's --data says what it was (a state before texts had a fingerprint records
  // none for one, and the data line is then left out).
  const DataPathKind kind = data_path_kind(t.data);
  const bool token_dir = kind == DataPathKind::token_directory;
  const char* data_kind = kind == DataPathKind::conversations ? "conversations"
                          : token_dir                         ? "a token directory"
                          : kind == DataPathKind::text        ? "a text"
                                                              : "no longer at its --data path";
  std::printf("tokenizer    %s\n", tokenizer_flags(t, *ck.tokenizer, token_dir).c_str());
  std::printf("training     %s\n", settings_as_flags(t, Line::training).c_str());  // as the flags that give them
  if (!state->data_fingerprint.empty())
    std::printf("data         %s, fingerprint %s%s\n", data_kind,
                state->data_fingerprint.c_str(),
                t.sampling == Sampling::epoch
                    ? cat(" (epoch sampling at epoch ", state->data_epoch, ", window ", state->data_position, ")").c_str()
                    : "");
  if (state->train_seconds > 0)  // runs saved before it was kept have none
    std::printf("trained for  %.1f s of training steps\n", state->train_seconds);
  std::printf("optimizer    %s\n", settings_as_flags(t, Line::optimizer).c_str());
  std::printf("evaluation   %s\n", settings_as_flags(t, Line::evaluation).c_str());
}

std::function<int()> prepare_info(const po::variables_map& vm) {
  const std::string path = checkpoint_option(vm);
  // Nothing here shows a weight or the optimizer's moments: the headers alone are read.
  auto ck = std::make_shared<CheckpointHeader>(load_checkpoint_header(path));
  std::optional<TrainState> state;
  const std::filesystem::path state_path = std::filesystem::path(ck->path).parent_path() / "state.safetensors";
  // Only --resume needs the state: unreadable, it costs info the training lines, not the
  // model's (generate and serve read the weights alone too).
  if (std::filesystem::is_directory(path) && std::filesystem::exists(state_path)) try {
      state = load_state_settings(state_path.string());
    } catch (const Error& e) {
      warn(cat(state_path.string(), " cannot be read, so the training state is not shown (--resume needs that file): ",
               e.what()));
    }
  if (vm.count("export-tokenizer")) {
    std::optional<std::string> model;
    try {
      model = ck->tokenizer->export_model();
    } catch (const Error& e) {  // a chat model's file that would not give its ids
      throw UsageError(cat("--export-tokenizer: ", ck->path, ": ", e.what()));
    }
    if (!model)
      throw UsageError(cat("--export-tokenizer: ", ck->path, " holds the tokenizer ", ck->tokenizer->describe(), ", ",
                           why_no_file(*ck, path)));
    const std::string out = vm["export-tokenizer"].as<std::string>();
    check_output(vm, "--export-tokenizer " + out, out);
    return [=] {
      write_output(out, *model, cat("the SentencePiece model of ", ck->path, ", ", ck->tokenizer->vocab_size(), " pieces"));
      return 0;
    };
  }
  // Only its step is shown, which its header holds: the weights are not read. Damaged,
  // it costs info this line, not the others.
  std::optional<BestCheckpoint> best;
  const std::filesystem::path best_path = std::filesystem::path(ck->path).parent_path() / "best.safetensors";
  if (std::filesystem::is_directory(path) && std::filesystem::exists(best_path)) try {
      best = BestCheckpoint{best_path.string(), checkpoint_step(best_path.string())};
    } catch (const Error& e) {
      warn(cat(best_path.string(), " cannot be read, so the best checkpoint is not shown: ", e.what()));
    }
  return [=] {
    print_info(*ck, state, best);
    return 0;
  };
}

}  // namespace

const Command kInfo = {"info", "config, parameter count and training state of a checkpoint",
                       "Prints the model config, parameter count, tokenizer (kind, size, fingerprint)\n"
                       "and training state of a checkpoint (a run directory, or a .safetensors file), and\n"
                       "the step of a run directory's best.safetensors.\n"
                       "--export-tokenizer FILE writes its SentencePiece model as a .model file instead.",
                       declare_info, prepare_info};

}  // namespace folio::cli
