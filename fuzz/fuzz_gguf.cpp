// libFuzzer target over the GGUF reader and folio import's model mapping (io/gguf.h,
// io/gguf_model.h). Build and run with scripts/fuzz.sh (clang,
// -fsanitize=fuzzer,address,undefined).
#include <cstdint>

#include "autograd/parallel.h"
#include "fuzz/gguf_entry.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  folio::set_num_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  folio::fuzz::load_gguf_bytes(data, size);
  return 0;
}
