#pragma once
// The one entry point shared by the libFuzzer target (fuzz/fuzz_checkpoint.cpp) and
// the regression test over fuzz/corpus (tests/test_fuzz_corpus.cpp): the bytes of an
// untrusted checkpoint go through the same readers `folio` uses on a file it is given.
//
// Contract under test: for ANY bytes, load_model, checkpoint_step (its header alone)
// and load_state either succeed or throw folio::Error, and checkpoint_step gives the
// step of every file load_model accepts. Anything else (another exception, a crash, a sanitizer report,
// an allocation beyond what the file holds) is a bug. Other exceptions propagate to
// the caller: libFuzzer then aborts and reports the input, GoogleTest fails the test.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "base/error.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "train/run_state.h"
#include "train/config_json.h"
#include "train/optimizer.h"

namespace folio::fuzz {

// Writes `size` bytes to `path`, replacing it. Aborts on an I/O error: that is the
// harness failing, not the code under test.
inline void write_bytes(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  for (size_t done = 0; done < size;) {
    const ssize_t w = ::write(fd, data + done, size - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) std::abort();
    done += size_t(w);
  }
  ::close(fd);
}

// What an accepted file must satisfy ("everything read back is validated"): a
// violation aborts, so the fuzzer reports a reader that lets bad values through as
// it reports a crash.
inline void require(bool ok) {
  if (!ok) std::abort();
}

inline bool finite(const float* p, size_t n, bool non_negative = false) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i]) || (non_negative && p[i] < 0.0f)) return false;
  return true;
}

inline void check_model(const ModelCheckpoint& ck) {
  require(ck.model && ck.step >= 0);
  const nn::GPTConfig& c = ck.model->config();
  require(ck.tokenizer && ck.tokenizer->vocab_size() == c.vocab_size);
  require(ck.model->num_parameters() == c.parameter_count());
  for (const auto& [name, p] : ck.model->named_parameters()) require(finite(p.data(), size_t(p.numel())));
  // What was read can be written back and read again to the same config.
  require(to_json(model_config_from_json(Json::parse(to_json(c).dump()), "again")) == to_json(c));
}

inline void check_state(const TrainState& st, const std::string& path) {
  require(st.step >= 0 && std::isfinite(st.best_val_loss));
  // The optimizer's state holds up as its optimizer checks it (throws folio::Error if not).
  Optimizer::check_state(st.config.optimizer, st.optimizer, path);
  for (const auto& t : st.optimizer.tensors) require(finite(t.tensor.data(), size_t(t.tensor.numel())));
  st.config.validate();  // throws folio::Error: the reader accepted a config training refuses
  require(to_json(train_config_from_json(Json::parse(to_json(st.config).dump()), "again")) == to_json(st.config));
  // Numbers stored as text (the seed) are read only in the form they are written.
  const Json tc = Json::parse(load_safetensors(path).meta("train_config"));
  require(tc.find("seed")->as_string() == std::to_string(st.config.seed));
}

// Feeds the bytes, as the file `path`, to the model and the training-state readers.
// Returns how many of the two accepted the file (0, 1 or 2).
inline int load_checkpoint_bytes(const uint8_t* data, size_t size, const std::string& path) {
  write_bytes(path, data, size);
  int accepted = 0;
  std::optional<ModelCheckpoint> ck;
  try {
    ck = load_model(path);
  } catch (const Error&) {
  }
  std::optional<int64_t> step;
  try {
    step = checkpoint_step(path);
  } catch (const Error&) {
  }
  if (ck) check_model(*ck), require(step == ck->step), ++accepted;
  std::optional<TrainState> st;
  try {
    st = load_state(path);
  } catch (const Error&) {
  }
  if (st) {
    try {
      check_state(*st, path);
    } catch (const Error&) {
      std::abort();  // an accepted state that does not hold up is a reader bug
    }
    ++accepted;
  }
  return accepted;
}

}  // namespace folio::fuzz
