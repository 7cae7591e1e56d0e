#pragma once
// A whole file as bytes, with the checks every reader of a user's file needs: the text
// a run trains on (data/dataset.h), a tokenizer's files, HF's config.json.
#include <cstdint>
#include <string>

namespace folio {

// The most read_file reads: text is held whole in memory (and tokenized to 4 bytes a
// character), so a larger file is refused instead of exhausting memory. The bundled
// corpus is 1.1 MB.
constexpr int64_t kMaxTextFileBytes = int64_t(1) << 30;  // 1 GiB

// The whole file as bytes. Only regular files are read: a device (/dev/zero) could
// be endless and opening a FIFO waits for a writer, so those are refused from their
// type, before opening. Errors: "[data] <path>: cannot open (<strerror>)",
// "[data] <path>: is a directory, not a regular file" (or a FIFO, a character
// device...), "[data] <path>: N bytes, more than the limit of M bytes", "[data] <path>:
// file is empty".
std::string read_file(const std::string& path, int64_t max_bytes = kMaxTextFileBytes);

}  // namespace folio
