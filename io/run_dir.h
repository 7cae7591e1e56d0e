#pragma once
// A run directory and the protocol that keeps it usable whatever happens to the
// process writing it (see run_dir.cpp): every save is one commit, and a directory
// cut short at any point loads, resumes, and is used by generate/eval/info.
//   model.safetensors  the latest weights      best.safetensors  the lowest val loss
//   state.safetensors  what --resume needs     log.csv, loss.svg  the evaluations
// The directory does not know what the state holds: the trainer writes and reads it
// (train/run_state.h), and gives RunDir its step and a function that writes it.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/tokenizer.h"
#include "nn/transformer.h"

namespace folio {

// A save that failed before its commit: the directory holds the checkpoint before it, whole.
struct SaveNotCommitted : Error {
  using Error::Error;
};

// One writer a run directory: while a RunDirLock lives (an flock on the directory, let
// go when the process ends however it ends), another process's cannot be taken. Two
// trainers on one --out would interleave their saves (the same pending file names).
class RunDirLock {
 public:
  // fail()s naming the directory if another process holds its lock. On a file system
  // without locks it guards nothing, and fails nothing.
  explicit RunDirLock(const std::string& dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_ = -1;
};

class RunDir {
 public:
  explicit RunDir(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  std::string model_file() const { return file("model.safetensors"); }
  std::string best_file() const { return file("best.safetensors"); }
  std::string state_file() const { return file("state.safetensors"); }
  std::string log_file() const { return file("log.csv"); }
  std::string plot_file() const { return file("loss.svg"); }
  // Every file above, the latest weights first.
  std::vector<std::string> files() const {
    return {model_file(), best_file(), state_file(), log_file(), plot_file()};
  }

  // Fails, before anything is written, if the path cannot become a directory we can
  // write into (it or its nearest existing ancestor is something else, or refuses
  // new entries).
  void check_usable() const;
  // The directory holds the files of a run (a weights file, the state or the log).
  bool holds_run() const;
  // The directory's lock, or null while there is no directory to lock yet.
  std::unique_ptr<RunDirLock> lock() const;
  // Creates the directory; for a fresh run, also removes the temp files of writers
  // that were killed mid-save.
  void create(bool fresh) const;
  // For --resume, once the state (the commit record of the last save) is read and
  // found at `state_step`: finishes or drops the weights of a save cut short.
  void recover(int64_t state_step) const;
  // Saves the weights (and the best weights, when `best`) of `step` and the state as
  // one commit; write_state(file) writes the state to `file` (atomically, as
  // save_safetensors does). `best`: the weights to keep as best.safetensors (the model
  // itself, or the average of its weights), null when this save is not the best.
  // `first`: the first save of a fresh run, in a directory that may hold another run's.
  // A failure before the commit throws SaveNotCommitted, after it (the renames) Error.
  void save(const nn::GPT& model, const Tokenizer& tokenizer, int64_t step, const nn::GPT* best, bool first,
            const std::function<void(const std::string& file)>& write_state) const;

 private:
  std::string file(const char* name) const;
  std::string path_;
};

}  // namespace folio
