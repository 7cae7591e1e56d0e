// folio tokenize's pipeline (data/tokenize.h): which files are documents, which split
// each goes to, what the shards hold, and the bad inputs that write nothing.
#include <gtest/gtest.h>

#include <cmath>

#include "data/documents.h"
#include "data/token_dir.h"
#include "data/tokenize.h"
#include "support.h"

namespace folio {
namespace {

using namespace testing;  // the suite's helpers (support.h): TempDir, slurp, spit, expect_error
namespace fs = std::filesystem;

TokenManifest tokenize(TokenizeOptions o) {
  return tokenize_corpus(o, [](const TokenizeProgress&) {}, [](const std::string&) {});
}

std::vector<int32_t> all_tokens(const TokenSequence& s) {
  std::vector<int32_t> out(size_t(s.size()));
  s.read(0, s.size(), out.data());
  return out;
}

// A small code base: sources, docs, a hidden directory, a binary and an empty file.
struct Tree {
  TempDir dir{"tokenize_tree"};
  Tree() {
    fs::create_directories(dir / "src/sub");
    fs::create_directories(dir / ".git");
    for (int i = 0; i < 40; ++i) spit(dir / ("src/f" + std::to_string(i) + ".c"), "int f" + std::to_string(i) + "(void) { return " + std::to_string(i) + "; }\n");
    spit(dir / "src/sub/deep.c", "/* deep */\n");
    spit(dir / "src/readme.md", "# notes\n");
    spit(dir / ".git/HEAD", "ref: x\n");
    spit(dir / "src/blob.c", std::string("\x7f" "ELF\0\0\0", 7));
    spit(dir / "src/empty.c", "");
  }
};

TEST(Tokenize, DocumentsAreTheMatchingReadableTextFiles) {
  Tree t;
  std::vector<std::string> warnings;
  const DocumentList all = find_documents({t.dir / "src"}, {}, [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_EQ(all.documents.size(), 42u);  // 40 + deep.c + readme.md
  EXPECT_EQ(all.binary, 1);
  EXPECT_EQ(all.empty, 1);
  const DocumentList c = find_documents({t.dir.path.string()}, {"*.c"}, [](const std::string&) {});
  EXPECT_EQ(c.documents.size(), 41u) << "hidden .git is skipped, readme.md does not match";
  EXPECT_EQ(c.documents.back().name, "src/sub/deep.c");
  const DocumentList sub = find_documents({t.dir.path.string()}, {"src/sub/*"}, [](const std::string&) {});
  ASSERT_EQ(sub.documents.size(), 1u);
  // '**' is zero or more directories, as in git and bash: src/f0.c and src/sub/deep.c.
  EXPECT_EQ(find_documents({t.dir.path.string()}, {"src/**/*.c"}, [](const std::string&) {}).documents.size(), 41u);
  EXPECT_EQ(find_documents({t.dir.path.string()}, {"**/deep.c"}, [](const std::string&) {}).documents.size(), 1u);
  EXPECT_EQ(find_documents({t.dir.path.string()}, {"src/**"}, [](const std::string&) {}).documents.size(), 42u);
  expect_error([&] { find_documents({t.dir.path.string()}, {"*.rs"}, [](const std::string&) {}); },
               {"no file matching", "--include '*.rs'"});
  expect_error([&] { find_documents({t.dir / "absent"}, {}, [](const std::string&) {}); }, {"absent", "no such file"});
}

TEST(Tokenize, ValIsAStableShareOfNames) {
  int val = 0;
  for (int i = 0; i < 20000; ++i) val += stable_val("dir/file_" + std::to_string(i) + ".txt", 0.1);
  EXPECT_NEAR(val / 20000.0, 0.1, 0.01);
  EXPECT_EQ(stable_val("a/b.c", 0.5), stable_val("a/b.c", 0.5));
  EXPECT_FALSE(stable_val("a/b.c", 1e-9));
}

TEST(Tokenize, ShardsHoldEveryDocumentAfterAnEndOfTextId) {
  Tree t;
  TokenizeOptions o;
  o.inputs = {t.dir / "src"};
  o.include = {"*.c"};
  o.out_dir = t.dir / "out";
  o.val_fraction = 0.2;
  o.tokenizer = {"char"};
  o.shard_tokens = 100;  // many shards: documents span them
  const TokenManifest m = tokenize(o);
  EXPECT_FALSE(fs::exists(t.dir.path / "out" / kIncompleteMarker));
  EXPECT_GT(m.train.shards.size(), 3u);
  for (size_t i = 0; i + 1 < m.train.shards.size(); ++i) EXPECT_EQ(m.train.shards[i].tokens, 100);
  EXPECT_EQ(m.train.documents + m.val.documents, 41);
  const TokenDir d = TokenDir::open(o.out_dir);
  const auto tok = d.tokenizer;
  const int32_t eot = *tok->end_of_text();
  EXPECT_EQ(m.end_of_text, eot);
  // Decoded in order, the splits are the documents, each after one end-of-text id,
  // train in sorted order of the names, and val the documents the hash picks.
  const DocumentList docs = find_documents(o.inputs, o.include, [](const std::string&) {});
  std::vector<int32_t> expected[2];
  for (const Document& doc : docs.documents) {
    auto& split = expected[stable_val(doc.name, o.val_fraction)];
    split.push_back(eot);
    for (int32_t id : tok->encode(slurp(doc.path))) split.push_back(id);
  }
  EXPECT_EQ(all_tokens(d.train), expected[0]);
  EXPECT_EQ(all_tokens(d.val), expected[1]);
  EXPECT_EQ(m.train.bytes + m.val.bytes, docs.bytes);
}

TEST(Tokenize, OneDocumentSplitsAsTrainOnAFileDoes) {
  TempDir dir("tokenize_one");
  const std::string file = testing::write_small_corpus(dir / "text.txt", 20000);
  TokenizeOptions o;
  o.inputs = {file};
  o.out_dir = dir / "out";
  o.tokenizer = {"char"};
  tokenize(o);
  const TokenDir d = TokenDir::open(o.out_dir);
  const Corpus c = Corpus::load(file, 0.9, TokenizerSpec{"char"});
  std::vector<int32_t> train = all_tokens(d.train), val = all_tokens(d.val);
  const int32_t eot = *d.tokenizer->end_of_text();
  ASSERT_EQ(train.front(), eot);
  ASSERT_EQ(val.front(), eot);
  // The same characters, the same ids (the end-of-text id comes after them all).
  EXPECT_EQ(std::vector<int32_t>(train.begin() + 1, train.end()), c.split.train);
  EXPECT_EQ(std::vector<int32_t>(val.begin() + 1, val.end()), c.split.val);
}

TEST(Tokenize, InvalidUtf8BecomesReplacementCharacters) {
  TempDir dir("tokenize_utf8");
  fs::create_directories(dir / "in");
  spit(dir / "in/a.txt", "caf\xe9 latin-1\n");
  for (int i = 0; i < 30; ++i) spit(dir / ("in/b" + std::to_string(i) + ".txt"), "plain text\n");
  TokenizeOptions o;
  o.inputs = {dir / "in"};
  o.out_dir = dir / "out";
  o.tokenizer = {"char"};
  o.val_fraction = 0.3;
  std::vector<std::string> warnings;
  const TokenManifest m = tokenize_corpus(o, [](const TokenizeProgress&) {}, [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_EQ(m.files_with_invalid_utf8, 1);
  ASSERT_EQ(warnings.size(), 1u);
  testing::expect_contains(warnings[0], {"a.txt", "not valid UTF-8", "1 byte replaced"});
  EXPECT_NE(m.tokenizer_description.find("characters"), std::string::npos);
}

// Too few documents for a split by name (none of these hashes below 0.001): each
// document's last val_fraction of characters validates instead, with a warning.
TEST(Tokenize, TooFewDocumentsForANameSplitSplitEachByPosition) {
  Tree t;
  TokenizeOptions o;
  o.inputs = {t.dir / "src"};
  o.include = {"f1.c", "f2.c", "f3.c"};
  o.out_dir = t.dir / "out";
  o.tokenizer = {"char"};
  o.val_fraction = 0.1;
  for (const char* name : {"f1.c", "f2.c", "f3.c"}) spit(t.dir.path / "src" / name, std::string(100, 'x') + "\n");
  std::vector<std::string> warnings;
  const TokenManifest m = tokenize_corpus(o, [](const TokenizeProgress&) {}, [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_EQ(m.val.documents, 3);
  EXPECT_EQ(m.val.chars, 3 * 11) << "the last 10 % of each document's 101 characters: 11 (from floor(90.9) on)";
  EXPECT_EQ(m.train.chars, 3 * 90);
  EXPECT_NE(m.val_rule.find("each document's last val_fraction of characters"), std::string::npos) << m.val_rule;
  ASSERT_EQ(warnings.size(), 1u);
  expect_contains(warnings[0], {"of the 3 documents, none fell into val by name", "each document's last 0.1"});
}

TEST(Tokenize, BadInputWritesNothing) {
  Tree t;
  auto options = [&](std::vector<std::string> inputs) {
    TokenizeOptions o;
    o.inputs = std::move(inputs);
    o.out_dir = t.dir / "out";
    o.tokenizer = {"char"};
    return o;
  };
  fs::create_directories(t.dir / "nothing");
  expect_error([&] { tokenize(options({t.dir / "nothing"})); }, {"nothing", "no readable, non-empty text file"});
  TokenizeOptions o = options({t.dir / "src"});
  o.include = {"f1.c", "f2.c"};
  // Two one-character documents cannot be split by name or by position.
  spit(t.dir / "src/one.c", "a");
  spit(t.dir / "src/two.c", "b");
  o.include = {"one.c", "two.c"};
  o.val_fraction = 0.001;
  expect_error([&] { tokenize(o); }, {"2 documents: 2 characters are too few to split at --val-fraction 0.001"});
  EXPECT_FALSE(fs::exists(t.dir / "out")) << "nothing is written before the input is known good";
  // A directory that holds other files is not taken over; one with a manifest is only
  // replaced with --overwrite.
  fs::create_directories(t.dir / "busy");
  spit(t.dir / "busy/keep.txt", "mine");
  o = options({t.dir / "src"});
  o.out_dir = t.dir / "busy";
  expect_error([&] { tokenize(o); }, {"busy", "is not a token directory", "1 entry of its own (keep.txt)"});
  o.overwrite = true;
  expect_error([&] { tokenize(o); }, {"busy", "is not a token directory"});
  EXPECT_EQ(fs::directory_iterator(t.dir / "busy")->path().filename(), "keep.txt");
  o.overwrite = false;
  o.out_dir = t.dir / "done";
  tokenize(o);
  expect_error([&] { tokenize(o); }, {"done", "already holds a token directory", "--overwrite"});
  o.overwrite = true;
  tokenize(o);
}

// A failed run cleans up after itself; a killed one cannot, and leaves the marker, so
// that folio train refuses the directory.
TEST(Tokenize, AFailureLeavesNothingAKillADirectoryTrainRefuses) {
  Tree t;
  TokenizeOptions o;
  o.inputs = {t.dir / "src"};
  o.out_dir = t.dir / "out";
  o.tokenizer = {"bpe", 100000};  // more pieces than this text has: SentencePiece fails
  try {
    tokenize(o);
    ADD_FAILURE() << "no error";
  } catch (const TokenizeInputError& e) {
    expect_contains(e.what(), {"--vocab-size 100000"});
  }
  EXPECT_FALSE(fs::exists(t.dir.path / "out"));
  fs::create_directories(t.dir.path / "out");
  spit(t.dir.path / "out" / kIncompleteMarker, "");  // as a killed run leaves it
  expect_error([&] { TokenDir::open(o.out_dir); }, {"did not finish"});
}

}  // namespace
}  // namespace folio
