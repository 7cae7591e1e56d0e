// folio tokenize: a corpus (files, directories, standard input) into a token directory
// for folio train --data DIR (data/tokenize.h says how).
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "base/size_text.h"
#include "cli/common.h"
#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"

namespace folio::cli {
namespace {

using Clock = std::chrono::steady_clock;

// SentencePiece's fewest pieces with byte fallback: 256 byte pieces, <unk>, <s> and
// </s>, and at least one of the text's characters.
constexpr int64_t kFewestSpmPieces = 256 + 3 + 1;

void declare(po::options_description& opts) {
  opts.add_options()("input", po::value<std::vector<std::string>>()->composing(),
                     "files and directories to read (recursively), or - for standard input; also given bare")
      ("out", po::value<std::string>(), "the token directory to write")
      ("include", po::value<std::vector<std::string>>()->composing(),
       "only files whose name matches this glob ('*.c'; with a '/', the path below the input directory, where '**' "
       "is any number of directories: 'src/**/*.h'); repeatable")
      ("tokenizer", with_default<std::string>("bpe"),
       "bpe (the default here; folio train's is char) or unigram (SentencePiece, trained on a sample of the "
       "training documents), char (the corpus's characters), or a tokenizer file: a SentencePiece .model, GPT-2's "
       "vocab.json and merges.txt (or their directory), or a .tiktoken rank file")
      ("vocab-size", with_default<int64_t>(0), "pieces of a bpe or unigram tokenizer (0: 1024)")
      ("tokenizer-from", po::value<std::string>(),
       "use this checkpoint's tokenizer (a run directory or .safetensors file) instead of making one, so that "
       "folio train --init-from it can train on the directory (a char vocabulary gains an end-of-text id)")
      ("val-fraction", with_default<double>(0.1),
       "share of documents that validate, chosen by a hash of their path (one document: its last share of text)")
      ("shard-tokens", with_default<int64_t>(100'000'000), "tokens per shard file")
      ("sample-mb", with_default<int64_t>(64), "MB of training text a bpe or unigram tokenizer learns from")
      ("overwrite", po::bool_switch(),
       "replace the token directory already in --out (a directory holding other files is never written into)");
  add_threads(opts);
}

// One line, rewritten in place on a terminal at most 5 times a second; off a
// terminal (a log), a line when the phase changes and every 10 seconds, and a phase's
// last figure before the next phase's line (in a log, the first figure of a phase
// alone would stand for all of it: "20.0 KB of 64.0 MB" after the first small document).
// SentencePiece's training reports nothing of its own: its line shows the seconds so
// far (training()).
class ProgressLine {
 public:
  void operator()(const TokenizeProgress& p) {
    const auto now = Clock::now();
    const bool new_phase = phase_ != p.phase;
    if (new_phase && !live_ && pending_) show(last_, now);  // the end of the phase before
    last_ = p;
    if (new_phase) phase_ = p.phase, phase_start_ = now;
    pending_ = true;
    if (new_phase || now - shown_ >= interval()) show(p, now);
  }
  // The seconds the tokenizer has trained so far, and whether it is done.
  void training(double seconds, bool done) {
    const auto now = Clock::now();
    if (phase_ != "training" || !(done || now - shown_ >= interval())) return;
    shown_ = now;
    const std::string line = cat("training the tokenizer on ", size_text(double(last_.bytes_total)), " of text: ",
                                 done ? cat("done in ", fixed1(seconds), " s") : cat(int64_t(seconds), " s"));
    print(line);
  }
  void end() {
    if (live_ && !phase_.empty()) std::printf("\r\033[K");
  }

 private:
  std::chrono::milliseconds interval() const { return std::chrono::milliseconds(live_ ? 200 : 10000); }
  static std::string fixed1(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
  }
  void show(const TokenizeProgress& p, Clock::time_point now) {
    shown_ = now;
    pending_ = false;
    const double seconds = std::chrono::duration<double>(now - phase_start_).count();
    std::string line;
    if (std::string(p.phase) == "training") {
      line = cat("training the tokenizer on ", size_text(double(p.bytes_total)), " of text");
    } else {
      const double rate = seconds > 0 ? double(p.bytes_done) / 1e6 / seconds : 0;
      const char* what = std::string(p.phase) == "characters" ? "collecting characters"
                         : std::string(p.phase) == "sample" ? "sampling text for the tokenizer" : "encoding";
      line = cat(what, ": ", size_text(double(p.bytes_done)), " of ", size_text(double(p.bytes_total)));
      if (rate > 0 && std::string(p.phase) != "sample") {
        line += cat(", ", size_text(rate * 1e6), "/s");
        if (p.bytes_done < p.bytes_total) line += cat(", ETA ", int64_t(double(p.bytes_total - p.bytes_done) / 1e6 / rate), " s");
      }
    }
    print(line);
  }
  void print(const std::string& line) {
    if (live_) std::printf("\r\033[K%s", line.c_str());
    else std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }

  bool live_ = ::isatty(1);
  std::string phase_;
  TokenizeProgress last_{""};  // the phase's latest figure
  bool pending_ = false;       // ... not shown yet
  Clock::time_point phase_start_ = Clock::now(), shown_{};
};

// The sizes --vocab-size may take whatever the text (SentencePiece checks the rest as it
// trains: the text's characters, and how many pieces it can make of them).
void check_vocab_size(const TokenizerSpec& spec) {
  const int64_t v = spec.vocab_size;
  if (v == 0) return;  // the method's default
  if (v < 0) throw UsageError(cat("--vocab-size must be >= 0, got ", v));
  if (spec.name == "char")
    throw UsageError(cat("--vocab-size goes with bpe or unigram: a char vocabulary is the text's characters, got ", v));
  if (!is_tokenizer_method(spec.name))
    throw UsageError(cat("--vocab-size goes with a method (bpe, unigram), not with the tokenizer file ", spec.name,
                         ", whose size is its own"));
  if (v < kFewestSpmPieces)
    throw UsageError(cat("--vocab-size ", v, " is too small for ", spec.name, ": it needs at least ", kFewestSpmPieces,
                         " (256 byte pieces, 3 control tokens and a piece for each of the text's characters)"));
  if (v > TokenizerSpec::kMaxVocab)
    throw UsageError(cat("--vocab-size ", v, " is above the most folio takes, ", TokenizerSpec::kMaxVocab));
}

std::function<int()> prepare(const po::variables_map& vm) {
  apply_threads(vm);
  TokenizeOptions o;
  if (vm.count("input")) o.inputs = vm["input"].as<std::vector<std::string>>();
  if (vm.count("include")) o.include = vm["include"].as<std::vector<std::string>>();
  if (o.inputs.empty()) throw UsageError("no input: give files or directories to tokenize (or - for standard input)");
  if (!vm.count("out")) throw UsageError("--out DIR is needed: where to write the token shards");
  o.out_dir = vm["out"].as<std::string>();
  // folio train refuses a --data path that is not UTF-8 (a checkpoint records it): say
  // so before the work, not after it with a "train on it with" that fails.
  if (std::string utf8 = o.out_dir; replace_invalid_utf8(utf8) > 0)
    throw UsageError(cat("--out ", utf8, ": the path is not valid UTF-8, which folio train needs of --data"));
  o.tokenizer = {vm["tokenizer"].as<std::string>(), vm["vocab-size"].as<int64_t>()};
  check_vocab_size(o.tokenizer);
  std::string tokenizer_from;
  if (vm.count("tokenizer-from")) {
    tokenizer_from = vm["tokenizer-from"].as<std::string>();
    for (const char* flag : {"tokenizer", "vocab-size"})
      if (!vm[flag].defaulted())
        throw UsageError(cat("--", flag, " and --tokenizer-from both say which tokenizer to use: give one of them"));
    o.tokenizer_from = with_end_of_text(*load_checkpoint_header(tokenizer_from).tokenizer);
  }
  o.val_fraction = vm["val-fraction"].as<double>();
  if (!(o.val_fraction > 0 && o.val_fraction < 1))
    throw UsageError(cat("--val-fraction must be in (0, 1), got ", o.val_fraction));
  o.shard_tokens = vm["shard-tokens"].as<int64_t>();
  if (o.shard_tokens < 1 || o.shard_tokens > INT32_MAX)
    throw UsageError(cat("--shard-tokens must be in [1, ", INT32_MAX, "] (a shard's header counts in int32), got ",
                         o.shard_tokens));
  const int64_t sample_mb = vm["sample-mb"].as<int64_t>();
  // The sample is held in memory, and counted in bytes: beyond 1 TiB is no sample.
  constexpr int64_t kMaxSampleMb = int64_t(1) << 20;
  if (sample_mb < 1 || sample_mb > kMaxSampleMb)
    throw UsageError(cat("--sample-mb must be in [1, ", kMaxSampleMb, "], got ", sample_mb));
  o.sample_bytes = sample_mb << 20;
  o.overwrite = vm["overwrite"].as<bool>();
  check_token_out_dir(o.out_dir, o.overwrite);  // before anything is read: a refusal is a usage error
  return [o, tokenizer_from] {
    const auto start = Clock::now();
    ProgressLine line;
    TokenizeOptions run = o;
    run.tokenizer.on_training = [&line](double seconds, int64_t, bool done) { line.training(seconds, done); };
    run.command = "folio tokenize";
    for (const std::string& in : o.inputs) run.command += " " + in;
    for (const std::string& p : o.include) run.command += " --include '" + p + "'";
    run.command += cat(" --out ", o.out_dir);
    if (o.tokenizer_from) run.command += cat(" --tokenizer-from ", tokenizer_from);
    else run.command += cat(" --tokenizer ", o.tokenizer.name);
    if (o.tokenizer.vocab_size) run.command += cat(" --vocab-size ", o.tokenizer.vocab_size);
    TokenManifest m;
    try {
      m = tokenize_corpus(run, std::ref(line), [&](const std::string& w) {
        line.end();
        warn(w);
      });
    } catch (const TokenizeInputError& e) {  // the input, found bad by reading it: exit 2
      line.end();
      throw UsageError(e.what());
    } catch (...) {
      line.end();
      throw;
    }
    line.end();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const int64_t bytes = m.train.bytes + m.val.bytes;
    std::printf("wrote %s in %.1f s (%s/s): %s\n", o.out_dir.c_str(), seconds,
                size_text(double(bytes) / std::max(seconds, 1e-9)).c_str(), m.tokenizer_description.c_str());
    for (auto [name, s] : {std::pair{"train", &m.train}, std::pair{"val", &m.val}})
      std::printf("  %-5s %s, %lld tokens from %s of text (%.2f bytes a token), %s\n", name,
                  plural(s->documents, "document").c_str(), (long long)s->tokens, size_text(double(s->bytes)).c_str(),
                  double(s->bytes) / double(std::max<int64_t>(s->tokens, 1)), plural(int64_t(s->shards.size()), "shard").c_str());
    if (m.skipped_files) std::printf("  skipped %s (empty, binary or unreadable)\n", plural(m.skipped_files, "file").c_str());
    std::printf("train on it with: folio train --data %s\n", o.out_dir.c_str());
    return 0;
  };
}

}  // namespace

const Command kTokenize = {
    "tokenize", "prepare a corpus of any size into token shards for folio train",
    "folio tokenize INPUT... --out DIR [--tokenizer bpe|unigram|char|FILE | --tokenizer-from RUN]\n"
    "Reads every file under the inputs (each file a document), makes the tokenizer,\n"
    "encodes the documents on all threads and writes DIR/train_NNNNNN.bin and\n"
    "DIR/val_NNNNNN.bin (llm.c's shard format: a 1024-byte header, then uint16 ids,\n"
    "or uint32 above 65,536 ids), each document after an end-of-text token, and last\n"
    "DIR/manifest.json. Memory stays bounded whatever the corpus size. A document is\n"
    "val when a hash of its path says so, so adding files never moves old ones; a\n"
    "single document is split as folio train --data FILE splits it. Hidden files,\n"
    "binary files (a NUL byte early on) and empty ones are skipped; bytes that are not\n"
    "UTF-8 become U+FFFD. An interrupted run leaves a directory folio train refuses.\n"
    "The tokenizer is bpe unless --tokenizer says otherwise (folio train's default is\n"
    "char: a large corpus is what subwords are for). To fine-tune a model on the\n"
    "directory (folio train --init-from RUN), make it with --tokenizer-from RUN.\n"
    "DIR must be new, empty or a token directory (--overwrite replaces one); a\n"
    "directory holding anything else is refused.",
    declare, prepare, "input"};

}  // namespace folio::cli
