#pragma once
// Reading and writing the safetensors format (https://github.com/huggingface/safetensors):
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   a UTF-8 JSON object: tensor name -> {"dtype":"F32","shape":[...],
//             "data_offsets":[begin,end]}, plus an optional "__metadata__" object of
//             string -> string; offsets count from the start of the data section
//   the rest  the data section: the tensors' bytes, little-endian, tiling it exactly
// Checkpoints may come from strangers, so the reader validates everything before it
// allocates or reads tensor data, never allocates more than the file holds, and
// reports one problem per Error: "[checkpoint] <path>: <field>: <what, with values>".
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace folio {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};
using Metadata = std::vector<std::pair<std::string, std::string>>;  // __metadata__, in order

// Writes F32 tensors in the order given (contiguous, header padded with spaces to a
// multiple of 8 bytes as the reference writer does, so the data is 8-byte aligned).
// Atomic: writes "<path>.tmp.<pid>" in the same directory, fsyncs it, renames it over
// `path` and fsyncs the directory. On failure the temp file is removed, an existing
// file at `path` is untouched, and the Error names the path and the system's reason.
// Names must be non-empty, unique and not "__metadata__"; metadata keys unique.
// Two threads of one process must not save to the same path at the same time.
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const Metadata& metadata = {});

// What a file says of itself in its header: its __metadata__, and its tensors' names
// and shapes.
struct SafetensorsMetadata {
  Metadata metadata;
  std::vector<std::pair<std::string, Shape>> shapes;  // in the header's order
  std::string path;  // where it was read from

  std::string meta(std::string_view key) const;  // throws (naming the file) if absent
};

struct SafetensorsFile : SafetensorsMetadata {
  std::vector<NamedTensor> tensors;  // in the header's order

  const Tensor* find(std::string_view name) const;  // nullptr if absent
};

// Reads and fully validates a safetensors file (F32 tensors of up to 4 dimensions).
SafetensorsFile load_safetensors(const std::string& path);

// Reads the header alone, for a file's metadata without its tensors (a checkpoint's
// step without its weights): validated as load_safetensors validates it, down to the
// tensors tiling the data section the file's size leaves, with the same errors. Only
// the tensor bytes are not read.
SafetensorsMetadata load_safetensors_metadata(const std::string& path);

}  // namespace folio
