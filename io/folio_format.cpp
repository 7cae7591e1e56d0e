#include "io/folio_format.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "base/error.h"

namespace folio {
namespace {

constexpr const char* kFormat = "folio-gpt-1";

}  // namespace

Metadata folio_metadata(const char* kind) {
  return {{"format", "pt"}, {"folio_format", std::string(kFormat) + kind}};
}

// What kind of folio file this is lives in "folio_format"; "format" is "pt", as
// Hugging Face's loaders require of a safetensors file. Files written before that
// change kept the kind in "format", and still load.
void check_folio_format(const SafetensorsMetadata& f, const std::string& where, const char* kind) {
  auto value = [&](const char* key) -> const std::string* {
    for (const auto& [k, v] : f.metadata)
      if (k == key) return &v;
    return nullptr;
  };
  const std::string expected = std::string(kFormat) + kind;
  const std::string* ours = value("folio_format");
  const std::string* legacy = value("format");
  // A model safetensors without folio's key is most likely HF's (folio export --format
  // hf writes one): say what reads it.
  const char* hf = !ours && std::string_view(kind) == "-model"
                       ? " An HF GPT-2 directory's model.safetensors is read by folio import RUN --from-hf DIR"
                       : "";
  if (ours ? *ours != expected : !legacy || *legacy != expected)
    fail("checkpoint", where, ": __metadata__.folio_format: expected \"", expected, "\" (not a folio ", kind + 1,
         " file?", hf, ")");
}

Json metadata_json(const SafetensorsMetadata& f, const char* key, const std::string& where) {
  const std::string text = f.meta(key);
  try {
    return Json::parse(text);
  } catch (const Error& e) {
    fail("checkpoint", where, ": __metadata__.", key, ": ", e.what());
  }
}

void check_finite(const Tensor& t, const std::string& name, const std::string& where, bool non_negative) {
  // NaN and the infinities fail |v| <= max; -0 is not below 0.
  const auto bad = [non_negative](float v) {
    const bool finite = std::abs(v) <= std::numeric_limits<float>::max();
    return !finite || (non_negative && v < 0.0f);
  };
  // A block at a time through a loop the compiler vectorizes (a loop that stops at the
  // first bad value does not), then the bad block's values one by one for the message.
  constexpr int64_t kBlock = 4096;
  const float* d = t.data();
  for (int64_t first = 0; first < t.numel(); first += kBlock) {
    const int64_t last = std::min(t.numel(), first + kBlock);
    int any = 0;
#pragma omp simd reduction(| : any)
    for (int64_t i = first; i < last; ++i) any |= int(bad(d[i]));
    if (!any) continue;
    for (int64_t i = first; i < last; ++i)
      if (bad(d[i]))
        fail("checkpoint", where, ": tensor ", name, ": value ", d[i], " at index ", i,
             non_negative ? " (must be finite and >= 0)" : " (must be finite)");
  }
}

}  // namespace folio
