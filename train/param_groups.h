#pragma once
// The groups of parameters log.csv's update/weight ratios are measured over
// (train/update_ratio.h), in terms a user knows; light, for train/progress.h.
#include <array>
#include <string_view>

namespace folio {

// embeddings: the token, position, bigram and value tables. attention and feed_forward:
// every block's attn.* and ffwd.*. norms: the LayerNorms' (or RMSNorms') weights and
// biases, and the x0 and U-net gates (gains too). output: lm_head and mtp_head (with
// tied weights, lm_head's matrix is token_embedding's: embeddings).
enum class ParamGroup { embeddings, attention, feed_forward, norms, output };
constexpr int kParamGroups = 5;
// log.csv's column: "update_ratio_embeddings", "update_ratio_attention", ...
const char* column_name(ParamGroup g);
ParamGroup group_of(std::string_view parameter_name);

using UpdateRatios = std::array<double, kParamGroups>;  // by ParamGroup; NaN: not measured

}  // namespace folio
