#pragma once
// The paths a command writes that the user named: one rule for all of them, checked
// before any work, and the atomic write that keeps it (cli/common.h includes this).
#include <boost/program_options.hpp>

#include <string>
#include <vector>

namespace folio::cli {

namespace po = boost::program_options;

// Writes `text` to standard output, or (a path given) to that file, atomically, and
// says so: "wrote PATH (what)".
void write_output(const std::string& path, const std::string& text, const std::string& what);
// The one rule for every path a command writes that the user named (--out FILE, a
// bare OUT.gguf, an export's or import's directory), checked before any work: refused
// (exit 2, naming it) when it cannot be written, and when something is there already
// unless --overwrite (add_overwrite) says to replace it; what is not a regular file
// (/dev/null, a FIFO) is refused either way. Nothing the user has is lost by a command
// that was not asked to.
void add_overwrite(po::options_description& options);
// `named`: the path as the user gave it, with its flag ("--out x.svg", or "x.gguf" for
// a bare word). `files_inside` empty: `path` is one file; else `path` is a directory
// (made if missing) and these are the files the command writes in it.
void check_output(const po::variables_map& vm, const std::string& named, const std::string& path,
                  const std::vector<std::string>& files_inside = {});
// An output that is a file the command reads (export RUN RUN/model.safetensors, import
// DIR --from-hf DIR) is refused, --overwrite or not: writing it would destroy the input
// the command was asked to convert. `named` as for check_output.
void check_not_input(const std::string& named, const std::string& output, const std::string& input);

}  // namespace folio::cli
