#include "io/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <system_error>

#include "base/atomic_file.h"
#include "base/error.h"
#include "io/checkpoint.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

// Crash safety. A save is three files, and a process can die between any two
// writes, so the files of one save are committed by ONE atomic rename:
//   1. the weights go to model.safetensors.pending (and best.safetensors.pending
//      when this evaluation is the best so far); nothing reads these names;
//   2. state.safetensors is replaced: THE COMMIT. From here on the save happened;
//   3. the pending files are renamed over best.safetensors and model.safetensors.
// Every prefix of this sequence leaves a usable directory: before 2, the previous
// checkpoint is whole (the pending files are junk, dropped on --resume); after 2,
// readers (generate, eval, info) still see the previous complete model until 3, and
// --resume first finishes step 3 (a pending file whose step equals the state's
// belongs to that commit) and so never sees a state and a model from different steps.
// Each file is itself written atomically (temp file, fsync, rename, fsync of the dir).
constexpr const char* kPending = ".pending";

[[noreturn]] void fail_io(const std::string& path, const char* what, int err) {
  fail("checkpoint", path, ": save: ", what, ": ", std::error_code(err, std::generic_category()).message());
}

void rename_file(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail_io(to, ("cannot rename " + from + " to it").c_str(), errno);
}

// True if it removed something.
bool remove_file(const std::string& path) {
  if (::unlink(path.c_str()) == 0) return true;
  if (errno != ENOENT) fail_io(path, "cannot remove", errno);
  return false;
}

void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_io(dir, "cannot open the directory to fsync it", errno);
  const int r = ::fsync(fd), err = errno;
  ::close(fd);
  if (r != 0 && err != EINVAL) fail_io(dir, "cannot fsync the directory", err);
}

// Removes the temp files ("<name>.tmp.<pid>", see save_safetensors) that writers
// killed mid-save left in `dir`. Those of a live process are left alone.
void remove_dead_temp_files(const std::string& dir) {
  folio::remove_dead_temp_files(dir, [](std::string_view name) {
    for (const char* base : {"model.safetensors", "best.safetensors", "state.safetensors",
                             "model.safetensors.pending", "best.safetensors.pending", "loss.svg"})
      if (name == base) return true;
    return false;
  });
}

// Before --resume reads the directory: finish a save that committed (its state is
// on disk) but was cut short before its weights were renamed into place, and drop
// the pending weights of a save that never committed.
// (The caller has read the state.)
void recover_weights(const RunDir& run, int64_t state_step) {
  const std::string& dir = run.path();
  remove_dead_temp_files(dir);
  bool renamed = false;
  for (const std::string& target : {run.best_file(), run.model_file()}) {
    const std::string pending = target + kPending;
    if (!fs::exists(pending)) continue;
    int64_t step = -1;
    try {
      step = load_model(pending).step;
    } catch (const Error&) {
      // Unreadable: not a file this save protocol ever commits (each write is atomic).
    }
    if (step == state_step) rename_file(pending, target), renamed = true;
    else remove_file(pending);
  }
  if (renamed) sync_dir(dir);
}

}  // namespace

RunDirLock::RunDirLock(const std::string& dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0 || ::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  const int err = errno;
  ::close(fd_);
  fd_ = -1;
  if (err == EWOULDBLOCK)
    fail("train", dir, ": another trainer is writing this run directory (it holds the directory's lock): "
         "let it finish or stop it first, or give another --out");
  // Any other error: a file system without locks (some network and FUSE ones), where
  // the run goes on as before locks, unguarded.
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::string RunDir::file(const char* name) const { return (fs::path(path_) / name).string(); }

void RunDir::check_usable() const {
  const std::string& dir = path_;
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) fail("train", dir, ": cannot use as the output directory (", ec.message(), ")");
  const fs::path wanted = p;
  for (; !p.empty(); p = p.parent_path()) {
    const fs::file_status st = fs::status(p, ec);
    if (fs::exists(st)) {
      if (!fs::is_directory(st))
        fail("train", dir, ": cannot create the output directory (", p.string(), " is not a directory)");
      // It must take new entries: a read-only mount, a directory of another user, or
      // /proc would otherwise fail only at the first save. An existing output
      // directory is asked through its permissions and mount (a probe would touch a
      // run that must stay as it is); for the one the output directory is to be made
      // in, a probe directory (removed at once) asks the file system itself, which
      // permission bits cannot (root passes them, /proc refuses root).
      int err = 0;
      if (p == wanted) {
        struct statvfs vfs {};
        if (::access(p.c_str(), W_OK | X_OK) != 0) err = errno;
        else if (::statvfs(p.c_str(), &vfs) == 0 && (vfs.f_flag & ST_RDONLY)) err = EROFS;
      } else if (const fs::path probe = p / cat(".folio-probe.", ::getpid()); ::mkdir(probe.c_str(), 0700) == 0) {
        ::rmdir(probe.c_str());
      } else {
        err = errno;
      }
      if (err)
        fail("train", dir, ": cannot ", p == wanted ? "write into" : "create", " the output directory (",
             p.string(), " takes no new entries: ", std::error_code(err, std::generic_category()).message(), ")");
      return;
    }
    if (p == p.parent_path()) return;
  }
}

bool RunDir::holds_run() const {
  std::error_code ec;
  for (const std::string& f : {model_file(), best_file(), state_file(), log_file()})
    if (fs::exists(f, ec)) return true;
  return false;
}

std::unique_ptr<RunDirLock> RunDir::lock() const {
  return fs::is_directory(path_) ? std::make_unique<RunDirLock>(path_) : nullptr;
}

void RunDir::create(bool fresh) const {
  std::error_code ec;
  fs::create_directories(path_, ec);
  if (ec || !fs::is_directory(path_))
    fail("train", path_, ": cannot create the output directory (", ec ? ec.message() : "not a directory", ")");
  if (fresh) remove_dead_temp_files(path_);
}

void RunDir::recover(int64_t state_step) const { recover_weights(*this, state_step); }

void RunDir::save(const nn::GPT& model, const Tokenizer& tokenizer, int64_t step, const nn::GPT* best, bool first,
                  const std::function<void(const std::string& file)>& write_state) const {
  // A state an earlier run left here must not pair with this run's pending weights
  // should this first save be cut short.
  if (first && remove_file(state_file())) sync_dir(path_);
  try {
    save_model(model_file() + kPending, model, tokenizer, step);
    if (best) save_model(best_file() + kPending, *best, tokenizer, step);
    write_state(state_file());  // the commit
  } catch (const Error& e) {
    // Not committed: the pending weights are junk (--resume would drop them), and on a
    // full disk they would hold the room that the next save needs.
    for (const std::string& pending : {model_file() + kPending, best_file() + kPending}) ::unlink(pending.c_str());
    throw SaveNotCommitted(e.what());
  }
  if (best) rename_file(best_file() + kPending, best_file());
  rename_file(model_file() + kPending, model_file());
  sync_dir(path_);
}

}  // namespace folio
