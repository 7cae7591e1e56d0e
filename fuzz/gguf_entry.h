#pragma once
// The entry point shared by the GGUF fuzz target (fuzz/fuzz_gguf.cpp) and the regression
// test over fuzz/corpus-gguf (tests/test_fuzz_corpus.cpp): untrusted bytes go through
// the reader folio import uses, then, if they parse, through the model mapping.
//
// Contract under test: for ANY bytes, parse_gguf and model_from_gguf either succeed or
// throw folio::Error; a file that parses reads back to the same bytes' meaning.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/error.h"
#include "io/gguf.h"
#include "io/gguf_model.h"

namespace folio::fuzz {

// 1: a model folio can import; 0: refused with a folio::Error (parsed or not).
inline int load_gguf_bytes(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  GgufFile file;
  try {
    file = parse_gguf(bytes, "input.gguf");
  } catch (const Error&) {
    return 0;
  }
  // What was read writes back to a file that reads as the same (tensor data included).
  const GgufFile again = parse_gguf(gguf_bytes(file), "again.gguf");
  if (again.kv.size() != file.kv.size() || again.tensors.size() != file.tensors.size()) std::abort();
  for (size_t i = 0; i < file.tensors.size(); ++i)
    if (again.tensors[i].data != file.tensors[i].data || again.tensors[i].shape != file.tensors[i].shape) std::abort();
  try {
    const ImportedModel m = model_from_gguf(file, "input.gguf");
    if (!m.model || !m.tokenizer || m.tokenizer->vocab_size() != m.model->config().vocab_size) std::abort();
    return 1;
  } catch (const Error&) {
    return 0;
  }
}

}  // namespace folio::fuzz
