#pragma once
// The documents of a corpus, as `folio tokenize` finds them: every regular file under
// the inputs (directories are walked recursively, in sorted order), each one document.
//   - --include patterns (shell globs, e.g. '*.c') keep the files whose name matches
//     one of them; a pattern with a '/' matches the path below the input directory,
//     where a '**' component stands for zero or more directories ('src/**/*.h').
//   - Hidden entries (names starting with '.': .git, editor files) are skipped, as are
//     symbolic links to directories (a link cycle cannot trap the walk).
//   - A file that cannot be read, or that looks binary (a NUL byte in its first 8 KB),
//     is skipped with a warning counted in the result; an empty file is skipped too.
// Which documents validate is decided by their name alone (stable_val), so adding
// files to a corpus never moves an old one between train and val.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace folio {

struct Document {
  std::string path;  // to open
  std::string name;  // what decides its split: the path below its input directory, or as given
  int64_t bytes = 0;
};

struct DocumentList {
  std::vector<Document> documents;
  int64_t bytes = 0;          // all documents' sizes
  int64_t unreadable = 0, binary = 0, empty = 0;
};

// Errors: "[tokenize] <input>: no such file or directory", "[tokenize] <dir>: no file
// matches --include '*.c'". `warn` hears each skipped file. The directory `out` (the
// token directory being written, which may lie below an input) is never walked into.
DocumentList find_documents(const std::vector<std::string>& inputs, const std::vector<std::string>& include,
                            const std::function<void(const std::string&)>& warn, const std::string& out = "");

// True when the document named `name` belongs to val: the top 20 bits of
// mix(FNV-1a 64 of the name), mix being splitmix64's finaliser, fall below
// val_fraction * 2^20.
bool stable_val(const std::string& name, double val_fraction);

}  // namespace folio
