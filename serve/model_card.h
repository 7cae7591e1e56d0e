#pragma once
// What folio serve says about the model it serves, found from the checkpoint's place
// on disk (at start, never per request):
//   name     the run directory's name: runs/x, runs/x/model.safetensors and
//            runs/x/best.safetensors all serve as "x" (a file outside a run: its stem)
//   created  the checkpoint file's modification time, Unix seconds
//   prompt   the page's starting prompt: the first line of the text the run trained on
//            (its path is in the run's state.safetensors), so a model of any corpus
//            starts in its own voice; without that text (a token directory, a moved
//            file, a bare checkpoint), a newline: the start of a line, in no corpus's voice
#include <cstdint>
#include <string>

#include "io/checkpoint.h"

namespace folio::serve {

struct ModelCard {
  std::string name;
  int64_t created = 0;
  std::string prompt;
  std::string prompt_from;  // the training text's path, or "" for the newline
};

// checkpoint: --checkpoint as given (a run directory or a .safetensors file).
ModelCard model_card(const std::string& checkpoint, const ModelCheckpoint& ck);

}  // namespace folio::serve
