#pragma once
// Pictures of causal attention: a text table for one head, and an SVG grid of heatmaps
// for many (rows: layers, columns: heads), both labelled with the prompt's tokens.
#include <cstdint>
#include <string>
#include <vector>

namespace folio::viz {

// One head's weights for a prompt of T tokens: T x T, row-major, rows are
// queries and columns keys (zero above the diagonal).
struct AttentionMap {
  std::string title;  // "layer 0, head 1"
  int64_t T = 0;
  std::vector<float> weights;
};

// Labels are shown as given: the caller makes them readable (visible_token in
// data/tokenizer.h writes "␣" for a space and "\n" for a newline).

// The weights with 3 decimals, a header row of keys and a column of queries.
std::string attention_table(const std::vector<std::string>& labels, const AttentionMap& map);

// Heatmaps laid out `columns` to a row, in the order given, with a colour scale.
std::string attention_grid_svg(const std::vector<std::string>& labels, const std::vector<AttentionMap>& maps,
                               int columns);

}  // namespace folio::viz
