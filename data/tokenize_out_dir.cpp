#include "data/tokenize_out_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <filesystem>
#include <vector>

#include "base/atomic_file.h"
#include "base/error.h"
#include "data/token_manifest.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStdinFile = ".stdin.txt";  // standard input, spooled into the directory

// train_000000.bin, val_000012.bin: a shard as tokenize names them.
bool is_shard_name(const std::string& name) {
  for (const std::string prefix : {"train_", "val_"}) {
    if (!name.starts_with(prefix) || !name.ends_with(".bin")) continue;
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - 4);
    if (digits.size() >= 6 && std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit((unsigned char)c); }))
      return true;
  }
  return false;
}

bool is_token_dir_entry(const std::string& name) {
  return name == kManifestFile || name == kIncompleteMarker || name == kStdinFile || is_shard_name(name);
}

// "4 entries (notes.txt, run1/, run2/, run3/)": what is there besides a token
// directory's files, a few names of it.
std::string foreign_entries(const std::vector<std::string>& names) {
  std::string shown;
  const size_t show = std::min<size_t>(names.size(), 5);
  for (size_t i = 0; i < show; ++i) shown += cat(i ? ", " : "", names[i]);
  if (names.size() > show) shown += cat(", and ", names.size() - show, " more");
  return cat(names.size(), names.size() == 1 ? " entry" : " entries", " of its own (", shown, ")");
}

}  // namespace

void check_token_out_dir(const std::string& dir, bool overwrite) {
  std::error_code ec;
  if (dir.empty()) fail("tokenize", "--out is needed: the directory to write the token shards into");
  if (!fs::exists(dir, ec)) return;
  if (!fs::is_directory(dir, ec)) fail("tokenize", "--out ", dir, ": exists and is not a directory");
  std::vector<std::string> foreign;
  bool manifest = false, marker = false, shards = false;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    manifest = manifest || name == kManifestFile;
    marker = marker || name == kIncompleteMarker;
    shards = shards || is_shard_name(name);
    if (!is_token_dir_entry(name)) foreign.push_back(name + (entry.is_directory(ec) ? "/" : ""));
  }
  if (ec) fail("tokenize", "--out ", dir, ": cannot list the directory (", ec.message(), ")");
  std::sort(foreign.begin(), foreign.end());
  if (!foreign.empty())
    fail("tokenize", "--out ", dir, " is not a token directory: it holds ", foreign_entries(foreign),
         ". folio tokenize writes only into a new or empty directory or a token directory, and --overwrite "
         "replaces only a token directory: give another --out, such as ", (fs::path(dir) / "tokens").string());
  if (overwrite || marker) return;  // an earlier run's leftovers (marker) are redone
  if (manifest)
    fail("tokenize", "--out ", dir, " already holds a token directory: --overwrite replaces it, or give another --out");
  if (shards)
    fail("tokenize", "--out ", dir, " holds token shards without a manifest.json: --overwrite replaces them, or give "
         "another --out");
}

void start_token_out_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("tokenize", "--out ", dir, ": cannot create (", ec.message(), ")");
  write_file_atomic((fs::path(dir) / kIncompleteMarker).string(), "folio tokenize is writing this directory\n");
  fs::remove(fs::path(dir) / kManifestFile, ec);
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (is_shard_name(entry.path().filename().string())) fs::remove(entry.path(), ec);
}

std::string spool_stdin(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("tokenize", "--out ", dir, ": cannot create (", ec.message(), ")");
  // Killed while copying, the directory must read as unfinished, not as a folder of
  // text: the marker goes first, but into an earlier token directory, which stays whole.
  if (!fs::exists(fs::path(dir) / kManifestFile, ec))
    write_file_atomic((fs::path(dir) / kIncompleteMarker).string(), "folio tokenize is reading standard input\n");
  const std::string path = (fs::path(dir) / kStdinFile).string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("tokenize", path, ": cannot create (", std::strerror(errno), ")");
  std::vector<char> buffer(size_t(1) << 20);
  for (;;) {
    const ssize_t got = ::read(0, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail("tokenize", "standard input: ", std::strerror(errno));
    if (got == 0) break;
    for (ssize_t off = 0; off < got;) {
      const ssize_t w = ::write(fd, buffer.data() + off, size_t(got - off));
      if (w <= 0) ::close(fd), fail("tokenize", path, ": cannot write (", std::strerror(w < 0 ? errno : ENOSPC), ")");
      off += w;
    }
  }
  ::close(fd);
  return path;
}

std::string name_stdin(std::string text, const std::string& copy) {
  if (copy.empty()) return text;
  constexpr std::string_view kName = "standard input";
  for (size_t at = text.find(copy); at != std::string::npos; at = text.find(copy, at + kName.size()))
    text.replace(at, copy.size(), kName);
  return text;
}

void finish_token_out_dir(const std::string& dir) {
  std::error_code ec;
  fs::remove(fs::path(dir) / kStdinFile, ec);
  fs::remove(fs::path(dir) / kIncompleteMarker, ec);
}

void abandon_token_out_dir(const std::string& dir, bool existed_before, bool started) {
  std::error_code ec;
  fs::remove(fs::path(dir) / kStdinFile, ec);
  if (started) {
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (is_shard_name(entry.path().filename().string())) fs::remove(entry.path(), ec);
    fs::remove(fs::path(dir) / kIncompleteMarker, ec);
  } else if (!fs::exists(fs::path(dir) / kManifestFile, ec)) {  // standard input's marker, unless shards need it
    bool shards = false;
    for (const auto& entry : fs::directory_iterator(dir, ec)) shards = shards || is_shard_name(entry.path().filename().string());
    if (!shards) fs::remove(fs::path(dir) / kIncompleteMarker, ec);
  }
  if (!existed_before) fs::remove(dir, ec);  // only when empty: remove() leaves a directory with entries
}

}  // namespace folio
