#pragma once
// What every safetensors file folio writes shares, whatever it holds (the model
// checkpoint here in io/, a run's state in train/run_state.h):
//   folio_metadata()    the first __metadata__ entries: "format": "pt", as Hugging Face's
//                       loaders require, and "folio_format": "folio-gpt-1<kind>"
//   check_folio_format  the file is a folio file of that kind
//   metadata_json       a __metadata__ value parsed as JSON, errors naming the key
//   check_finite        a tensor read back holds finite values (and >= 0, if asked)
// Errors name the file: "[checkpoint] <file>: ...".
#include <string>

#include "io/json.h"
#include "io/safetensors.h"

namespace folio {

// kind: "-model" or "-state".
Metadata folio_metadata(const char* kind);
void check_folio_format(const SafetensorsMetadata& f, const std::string& where, const char* kind);

Json metadata_json(const SafetensorsMetadata& f, const char* key, const std::string& where);

// Values read back must be finite: a checkpoint never holds diverged numbers, and a
// model or optimizer loaded with one would only produce NaN.
void check_finite(const Tensor& t, const std::string& name, const std::string& where, bool non_negative = false);

}  // namespace folio
