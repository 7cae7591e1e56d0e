// folio tokens: how a checkpoint's tokenizer cuts a text, as ids, pieces or a table.
#include <cstdio>

#include "cli/common.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"

namespace folio::cli {
namespace {

void declare(po::options_description& opts) {
  add_checkpoint(opts);
  opts.add_options()("text", po::value<std::string>(), cat("the text to tokenize; ", kEscapesHelp).c_str())
      ("file", po::value<std::string>(), "tokenize this file instead")
      ("format", with_default<std::string>("table"),
       "ids (one line of ids), pieces (one line of the tokens' text, whitespace made visible) or table (a row a "
       "token: position, id, byte offset and length, piece)");
}

std::function<int()> prepare(const po::variables_map& vm) {
  const std::string format = vm["format"].as<std::string>();
  if (format != "ids" && format != "pieces" && format != "table")
    throw UsageError(cat("--format must be ids, pieces or table, got '", format, "'"));
  if (vm.count("text") == vm.count("file")) throw UsageError("give the text to tokenize as --text T or --file F (one of them)");
  std::string text = vm.count("text") ? unescaped(vm["text"].as<std::string>()) : read_file(vm["file"].as<std::string>());
  const std::string source = vm.count("text") ? "--text" : vm["file"].as<std::string>();
  // A byte that is not UTF-8 is read as U+FFFD, as folio train, eval and tokenize read a
  // text (and spm_encode): the tokens shown are those a model trained on it saw. (It
  // was refused here, so a file that trained was one this command could not show.)
  const int64_t replaced = replace_invalid_utf8(text);
  // The tokenizer alone: the weights are not read.
  auto ck = std::make_shared<CheckpointHeader>(load_checkpoint_header(checkpoint_option(vm)));
  std::vector<int32_t> ids;
  try {
    ids = ck->tokenizer->encode(text);
  } catch (const Error& e) {
    throw UsageError(cat(source, ": ", e.what(),
                         replaced ? cat(" (", plural(replaced, "byte"), " of the text, not UTF-8, read as U+FFFD)")
                                  : ""));
  }
  return [=] {
    if (replaced)
      warn(cat(invalid_utf8_warning(source, replaced), format == "table" ? " (the offsets count the text so read)" : ""));
    const Tokenizer& tok = *ck->tokenizer;
    std::string out;
    if (format == "table") out = cat(tok.describe(), ": ", ids.size(), " tokens, ", text.size(), " bytes\n",
                                     "position      id  offset  bytes  piece\n");
    size_t offset = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string bytes = tok.token_bytes(ids[i]);
      if (format == "ids") out += cat(i ? " " : "", ids[i]);
      else if (format == "pieces") out += cat(i ? " " : "", visible_token(bytes));
      else {
        char row[64];
        std::snprintf(row, sizeof row, "%8zu %7d %7zu %6zu  ", i, ids[i], offset, bytes.size());
        out += row + visible_token(bytes) + "\n";
      }
      offset += bytes.size();
    }
    if (format != "table") out += "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
}

}  // namespace

const Command kTokens = {"tokens", "show how a checkpoint's tokenizer cuts a text",
                         "Tokenizes --text or --file with the checkpoint's tokenizer and prints the ids,\n"
                         "the pieces (\xE2\x90\xA3: space, \\n: newline, <0xNN>: a byte that is part of a\n"
                         "character), or a table of both with each token's byte offset in the text.\n"
                         "A byte that is not UTF-8 is read as U+FFFD, with a warning, as folio train and\n"
                         "folio tokenize read it.",
                         declare, prepare};

}  // namespace folio::cli
