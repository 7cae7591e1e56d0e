#pragma once
// The directory folio tokenize writes (data/tokenize.h), and what may be in it.
//
// A token directory holds manifest.json and the {train,val}_NNNNNN.bin shards, plus,
// while it is written, a marker file (kIncompleteMarker) and standard input's copy.
// tokenize writes only into a new or empty directory or into a token directory, so
// nothing the user keeps there is ever mixed with shards or deleted; --overwrite
// replaces a finished token directory, and never makes a folder of other files one.
#include <string>

namespace folio {

// The marker file an unfinished token directory holds.
constexpr const char* kIncompleteMarker = ".tokenize-incomplete";

// Throws "[tokenize] --out DIR ..." when tokenize may not write into `dir`: a file, a
// directory holding anything but a token directory's files (named in the message), or
// a finished token directory without `overwrite`. Writes nothing.
void check_token_out_dir(const std::string& dir, bool overwrite);

// From here on `dir` is being written: the marker first, then the old manifest goes
// (so no old manifest can describe new shards), then the old shards.
void start_token_out_dir(const std::string& dir);

// Standard input, copied into `dir` (created if new; it is one document, and its size
// must be known to split it); returns the copy's path. Done before the input is checked,
// after the marker unless `dir` holds a token directory (which stays whole): a killed
// copy leaves a directory folio train calls unfinished, not a folder of text to tokenize.
std::string spool_stdin(const std::string& dir);

// `text` with every mention of standard input's copy (`copy`, "" for none) as "standard
// input": the copy is folio's, and the user never named it.
std::string name_stdin(std::string text, const std::string& copy);

// After the manifest is written: the copy of standard input and the marker go.
void finish_token_out_dir(const std::string& dir);

// After a failed run (an error, not a kill, which leaves the marker for the next run to
// redo): the copy of standard input goes, and if the run had started writing
// (start_token_out_dir) its shards and the marker (before that, the marker goes only
// if no shards need it); `dir` itself goes if it did not exist
// before the run and is empty now. Nothing else in `dir` is touched.
void abandon_token_out_dir(const std::string& dir, bool existed_before, bool started);

}  // namespace folio
