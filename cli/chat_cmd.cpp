// folio chat: a conversation with a checkpoint in the terminal. Each user line is a
// turn; the reply streams as it is sampled, through the model's own template
// (data/chat_template.h: ChatML for a chat model, the plain text for a base model, which
// it says). The history is kept within the context: when the next prompt and a reply
// of --max-new-tokens would not fit in block_size, the oldest turns are dropped, with a
// notice; a turn that does not fit alone, or that the tokenizer cannot encode, is left
// out with a notice, the history kept. /reset forgets the history (the --system message
// stays). Ctrl-C stops a reply, not the program; Ctrl-D (end of input) exits.
//
// With standard input not a terminal (a script, a test), it reads one user turn a line
// and prints each reply on one line, its own newlines written as "\n", and no prompts;
// a turn left out gets an empty line, its notice on stderr, so that line N of the output
// answers turn N.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/common.h"
#include "data/chat_template.h"
#include "infer/generator.h"
#include "io/checkpoint.h"

namespace folio::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) { g_interrupted = 1; }

void declare(po::options_description& opts) {
  const SampleOptions d;
  add_checkpoint(opts);
  opts.add_options()("system", po::value<std::string>(), "a system message that begins the conversation")
      ("max-new-tokens", with_default<int64_t>(256), "the longest reply, in tokens")
      ("temperature", with_default<float>(0.8f), "softmax temperature (>= 0; 0: as --greedy)")
      ("top-k", with_default<int64_t>(d.top_k), "sample from the k most likely tokens (0: all)")
      ("top-p", with_default<float>(d.top_p), "nucleus sampling mass in (0, 1]")
      ("seed", with_default<std::string>("1337"), "sampling seed")
      ("greedy", po::bool_switch(), "always the most likely token");
  add_threads(opts);
}

SampleOptions sample_options(const po::variables_map& vm) {
  SampleOptions so = sampling_flags(vm, 1);  // a reply of no tokens is no reply
  so.validate();
  return so;
}

// A conversation's turns, and the prompt of the next reply within the context.
class History {
 public:
  History(const Tokenizer& tokenizer, std::optional<std::string> system, int64_t block_size, int64_t reply_tokens)
      : tokenizer_(tokenizer), system_(std::move(system)), block_(block_size),
        room_(std::max<int64_t>(1, block_size - std::min(reply_tokens, block_size / 2))) {}
  void reset() { turns_.clear(); }
  void add(const std::string& role, const std::string& content) { turns_.push_back({role, content}); }
  void drop_last() { turns_.pop_back(); }
  // The prompt for a reply to the last user turn; drops the oldest turns (a user turn
  // and its reply at a time) while it is longer than the room a reply leaves, saying so.
  // A turn that cannot be encoded, or that does not fit the context even alone (with the
  // system message; the rule serve and Python apply too: chat_context_overflow), throws
  // before any older turn is dropped for it: the generator would keep the prompt's last
  // block_size tokens, cutting the system message and the turn's start without a word.
  ChatPrompt prompt() {
    try {  // a character the model lacks, named at its place in the turn as typed
      tokenizer_.encode(turns_.back().content);
    } catch (const Error& e) {
      fail("chat", "the turn cannot be encoded: ", e.what());
    }
    std::vector<ChatMessage> alone;
    if (system_) alone.push_back({"system", *system_});
    alone.push_back(turns_.back());
    const int64_t n = int64_t(chat_prompt_for(tokenizer_, alone).ids.size());
    if (const std::optional<std::string> why = chat_context_overflow(n, block_))
      fail("chat", "the turn", system_ ? " with the system message" : "", " does not fit: ", *why);
    for (;;) {
      const ChatPrompt p = chat_prompt_for(tokenizer_, messages());
      if (int64_t(p.ids.size()) <= room_ || turns_.size() <= 1) return p;
      const size_t drop = turns_.size() >= 2 && turns_[1].role == "assistant" ? 2 : 1;
      turns_.erase(turns_.begin(), turns_.begin() + std::ptrdiff_t(drop));
      std::fprintf(stderr, "[chat] dropped the oldest turn: the conversation outgrew the model's context of %lld "
                   "tokens\n", (long long)block_);
    }
  }

 private:
  std::vector<ChatMessage> messages() const {
    std::vector<ChatMessage> m;
    if (system_) m.push_back({"system", *system_});
    m.insert(m.end(), turns_.begin(), turns_.end());
    return m;
  }
  const Tokenizer& tokenizer_;
  std::optional<std::string> system_;
  int64_t block_, room_;  // the context; the most a prompt may take of it
  std::vector<ChatMessage> turns_;
};

// The --system message begins every prompt: one the tokenizer cannot encode, or that
// leaves no room in the context for a turn (an empty one) and a reply's first token,
// would have every turn refused. Refused once, before the conversation starts.
void check_system(const ModelCheckpoint& ck, const std::string& system) {
  try {
    ck.tokenizer->encode(system);
  } catch (const Error& e) {
    throw UsageError(cat("--system cannot be encoded by ", ck.path, "'s tokenizer: ", e.what()));
  }
  const ChatMessage shortest[] = {{"system", system}, {"user", ""}};
  const int64_t n = int64_t(chat_prompt_for(*ck.tokenizer, shortest).ids.size());
  const int64_t block_size = ck.model->config().block_size;
  if (chat_context_overflow(n, block_size))
    throw UsageError(cat("--system leaves no room for a turn: with the template it takes ", n, " tokens of ", ck.path,
                         "'s context of ", block_size, " (block_size), which a turn and the reply's first token "
                         "must share; give a shorter one"));
}

std::function<int()> prepare(const po::variables_map& vm) {
  apply_threads(vm);
  const SampleOptions so = sample_options(vm);
  const uint64_t seed = u64_option(vm["seed"].as<std::string>(), "seed");
  std::optional<std::string> system;
  if (vm.count("system")) system = vm["system"].as<std::string>();
  auto ck = std::make_shared<ModelCheckpoint>(load_model(checkpoint_option(vm)));
  ck->model->eval();
  if (std::string(ck->tokenizer->kind()) == "ids")
    throw UsageError(cat(ck->path, " was trained on token ids without a tokenizer: it cannot read a conversation"));
  if (system) check_system(*ck, *system);
  return [=] {
    const bool terminal = isatty(STDIN_FILENO);
    const Tokenizer& tokenizer = *ck->tokenizer;
    if (!tokenizer.chat_tokens())
      std::fprintf(stderr, "[chat] %s is a base model, without a chat template: the conversation is written as plain "
                   "\"User:\"/\"Assistant:\" text, and a reply ends at a blank line\n", ck->path.c_str());
    else if (terminal)
      std::fprintf(stderr, "[chat] %s, ChatML template. /reset forgets the conversation; Ctrl-C stops a reply; "
                   "Ctrl-D exits.\n", ck->path.c_str());
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    action.sa_flags = SA_RESTART;  // a read at the prompt goes on: Ctrl-C there does nothing
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    Rng rng(seed);
    infer::Generator generator(*ck->model, 1, true);
    History history(tokenizer, system, ck->model->config().block_size, so.max_new_tokens);
    std::string line;
    for (;;) {
      if (terminal) std::fputs("> ", stderr);
      if (!std::getline(std::cin, line)) break;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line == "/reset") {
        history.reset();
        if (terminal) std::fputs("[chat] the conversation is forgotten\n", stderr);
        continue;
      }
      if (line.empty()) continue;
      history.add("user", line);
      ChatPrompt p;
      try {
        p = history.prompt();
      } catch (const Error& e) {  // the turn alone is refused: what was said before stays
        std::fprintf(stderr, "%s%s (the turn is left out; the conversation before it is kept)\n",
                     std::string_view(e.what()).starts_with("[chat]") ? "" : "[chat] ", e.what());
        // Its reply's line, empty: a script reading a reply a turn kept its place only
        // while no turn was refused.
        if (!terminal) {
          std::fputs("\n", stdout);
          std::fflush(stdout);
        }
        history.drop_last();
        continue;
      }
      g_interrupted = 0;
      generator.start(0, p.ids, so, rng, &tokenizer, p.stops, p.end_token);
      std::string reply;
      auto show = [&](const std::string& text) {
        reply += text;
        std::string out = text;
        if (!terminal)  // one reply a line
          for (size_t at = 0; (at = out.find('\n', at)) != std::string::npos; at += 2) out.replace(at, 1, "\\n");
        std::fwrite(out.data(), 1, out.size(), stdout);
        std::fflush(stdout);
      };
      bool stopped = false;
      for (int64_t n = 0; n < so.max_new_tokens && !stopped && !g_interrupted; ++n) {
        const infer::Generator::Token t = generator.next();
        show(t.text);
        stopped = t.stopped;
      }
      if (!stopped) show(generator.finish().text);
      if (g_interrupted && terminal) std::fputs(" [stopped]", stdout);
      std::fputs("\n", stdout);
      std::fflush(stdout);
      history.add("assistant", reply);
    }
    if (terminal) std::fputs("\n", stderr);
    return 0;
  };
}

}  // namespace

const Command kChat = {
    "chat", "a conversation with a checkpoint in the terminal",
    "A conversation with a checkpoint: type a turn, read the reply as it streams.\n"
    "A chat model (fine-tuned on conversations: docs/chat.md) reads its own template,\n"
    "ChatML; a base model reads a plain \"User:\"/\"Assistant:\" text, and says so.\n"
    "The oldest turns are dropped, with a notice, when the conversation outgrows the\n"
    "model's context; a turn longer than the context alone is left out, with a notice.\n"
    "/reset forgets the conversation (--system stays); Ctrl-C stops a reply;\n"
    "Ctrl-D exits. With standard input not a terminal: one turn a line in, one reply\n"
    "a line out (its newlines written as \\n; a turn left out gets an empty line, its\n"
    "notice on standard error).",
    declare, prepare};

}  // namespace folio::cli
