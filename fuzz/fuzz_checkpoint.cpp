// libFuzzer target over the checkpoint readers: load_safetensors plus the model and
// training-state validation of io/checkpoint.cpp and io/config_json.cpp. Build and run with
// scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "autograd/parallel.h"
#include "fuzz/checkpoint_entry.h"

namespace {

// The file each input is written to: one per process (libFuzzer's -jobs and -fork
// run several), on tmpfs when there is one, removed at exit.
const std::string& input_path() {
  static const std::string path = std::string(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
                                  "/folio_fuzz_" + std::to_string(::getpid()) + ".safetensors";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  folio::set_num_threads(1);  // the readers are sequential; keep the fuzzer single-threaded
  std::atexit([] { ::unlink(input_path().c_str()); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  folio::fuzz::load_checkpoint_bytes(data, size, input_path());
  return 0;
}
