#pragma once
// How the decoder stores a model's matrices for inference (--weights): as the model
// holds them (f32), rounded to bf16 (half the bytes), or as int8 in blocks of 32 with
// an fp16 scale each (GGUF's Q8_0: 34 bytes per 32 weights, about a quarter). The
// products read them as stored and widen them in registers; activations stay fp32.
#include <array>
#include <optional>
#include <span>
#include <string_view>

#include "base/parse_name.h"

namespace folio::nn {

enum class Weights { f32, bf16, int8 };
inline constexpr std::array<Weights, 3> kAllWeights = {Weights::f32, Weights::bf16, Weights::int8};

inline const char* to_string(Weights w) {
  switch (w) {
    case Weights::bf16: return "bf16";
    case Weights::int8: return "int8";
    default: return "f32";
  }
}

inline std::optional<Weights> parse_weights(std::string_view name) { return parse_name<Weights>(name, kAllWeights); }

}  // namespace folio::nn
