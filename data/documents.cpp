#include "data/documents.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "data/hash.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

// `path`'s components [p, end) against the pattern's [q, qend): each component by
// fnmatch, and a "**" component for zero or more of them (as git and bash's globstar
// read it), so 'a/**/*.h' takes a/x.h and a/b/c/x.h.
bool match_components(const std::vector<std::string>& pattern, size_t q, const std::vector<std::string>& path, size_t p) {
  for (; q < pattern.size(); ++q, ++p) {
    if (pattern[q] == "**") {
      for (size_t skip = p; skip <= path.size(); ++skip)
        if (match_components(pattern, q + 1, path, skip)) return true;
      return false;
    }
    if (p == path.size() || ::fnmatch(pattern[q].c_str(), path[p].c_str(), 0) != 0) return false;
  }
  return p == path.size();
}

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t slash; (slash = path.find('/', from)) != std::string::npos; from = slash + 1) out.push_back(path.substr(from, slash - from));
  out.push_back(path.substr(from));
  return out;
}

bool matches(const std::vector<std::string>& include, const std::string& relative, const std::string& file_name) {
  if (include.empty()) return true;
  for (const std::string& pattern : include) {
    const bool with_dir = pattern.find('/') != std::string::npos;
    if (with_dir ? match_components(components(pattern), 0, components(relative), 0)
                 : ::fnmatch(pattern.c_str(), file_name.c_str(), 0) == 0)
      return true;
  }
  return false;
}

// Opens and peeks at the file: "" when it is a document, else why not.
std::string why_not(const std::string& path, int64_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return cat("cannot read (", std::strerror(errno), ")");
  char head[8192];
  const ssize_t got = ::read(fd, head, size_t(std::min<int64_t>(size, int64_t(sizeof head))));
  const int err = errno;
  ::close(fd);
  if (got < 0) return cat("cannot read (", std::strerror(err), ")");
  if (std::memchr(head, 0, size_t(got))) return "binary";
  return "";
}

void add(DocumentList& list, std::string path, std::string name, int64_t size,
         const std::function<void(const std::string&)>& warn) {
  if (size == 0) return void(++list.empty);
  const std::string why = why_not(path, size);
  if (why == "binary") return void(++list.binary);
  if (!why.empty()) {
    ++list.unreadable;
    return warn(cat(path, ": ", why, ", skipped"));
  }
  list.bytes += size;
  list.documents.push_back({std::move(path), std::move(name), size});
}

}  // namespace

DocumentList find_documents(const std::vector<std::string>& inputs, const std::vector<std::string>& include,
                            const std::function<void(const std::string&)>& warn, const std::string& out) {
  DocumentList list;
  std::error_code out_ec;
  const bool out_exists = !out.empty() && fs::is_directory(out, out_ec);
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(input, ec);
    if (ec || !fs::exists(st)) {
      std::error_code link_ec;
      if (fs::is_symlink(fs::symlink_status(input, link_ec)))
        fail("tokenize", input, ": a symbolic link that leads nowhere readable (", ec ? ec.message() : "its target does not exist", ")");
      fail("tokenize", input, ": no such file or directory");
    }
    if (fs::is_regular_file(st)) {
      add(list, input, fs::path(input).lexically_normal().string(), int64_t(fs::file_size(input, ec)), warn);
      continue;
    }
    if (!fs::is_directory(st)) fail("tokenize", input, ": not a file or a directory");
    if (out_exists && fs::equivalent(input, out, out_ec))
      fail("tokenize", input, ": is --out itself, the token directory to write: give the text's directory");
    const size_t before = list.documents.size();
    std::vector<std::pair<std::string, int64_t>> found;  // relative path, size
    fs::recursive_directory_iterator it(input, fs::directory_options::skip_permission_denied, ec), end;
    if (ec) fail("tokenize", input, ": cannot read the directory (", ec.message(), ")");
    for (; it != end; it.increment(ec)) {
      if (ec) {
        warn(cat(input, ": ", ec.message(), ", skipped"));
        ec.clear();
        continue;
      }
      const fs::path& p = it->path();
      const std::string file_name = p.filename().string();
      if (file_name.starts_with(".")) {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (it->is_symlink(ec) && it->is_directory(ec)) {
        it.disable_recursion_pending();
        continue;
      }
      if (out_exists && it->is_directory(ec) && fs::equivalent(p, out, out_ec)) {  // its own output
        it.disable_recursion_pending();
        continue;
      }
      const std::string relative = p.lexically_relative(input).string();
      if (!it->is_regular_file(ec)) {
        // A link in a loop or to a file that is gone is an unreadable file, said so.
        std::error_code link_ec;
        if (it->is_symlink(link_ec) && !fs::exists(p, link_ec) && matches(include, relative, file_name)) {
          ++list.unreadable;
          warn(cat(p.string(), ": a symbolic link that leads nowhere readable (",
                   link_ec ? link_ec.message() : "its target does not exist", "), skipped"));
        }
        ec.clear();
        continue;
      }
      if (!matches(include, relative, file_name)) continue;
      found.emplace_back(relative, int64_t(it->file_size(ec)));
    }
    std::sort(found.begin(), found.end());
    for (auto& [relative, size] : found) add(list, (fs::path(input) / relative).string(), relative, size, warn);
    if (list.documents.size() == before) {
      std::string patterns;
      for (const std::string& p : include) patterns += cat(" --include '", p, "'");
      fail("tokenize", input, ": no ", include.empty() ? "readable, non-empty text file" : "file matching", patterns,
           include.empty() ? "" : " (readable, non-empty, not binary)", " in it");
    }
  }
  return list;
}

bool stable_val(const std::string& name, double val_fraction) {
  // FNV's top bits barely move for short names ("f1.c", "f2.c"): splitmix64's
  // finaliser spreads every bit over all of them first.
  const uint64_t h = mix64(fnv1a64(name));
  return double(h >> 44) < val_fraction * double(1u << 20);
}

}  // namespace folio
