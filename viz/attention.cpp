#include "viz/attention.h"

#include <algorithm>
#include <cstdio>

#include "viz/svg.h"

namespace folio::viz {

namespace {

// Pads `s` (UTF-8) on the left to `width` characters.
std::string pad_left(const std::string& s, size_t width) {
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
  std::string out(width > chars ? width - chars : 0, ' ');
  return out += s;
}

}  // namespace

std::string attention_table(const std::vector<std::string>& labels, const AttentionMap& map) {
  constexpr size_t kWidth = 6;
  std::string out = map.title + " (rows: queries, columns: keys)\n" + std::string(kWidth, ' ');
  for (int64_t k = 0; k < map.T; ++k) out += pad_left(labels[k], kWidth);
  out += '\n';
  char cell[32];
  for (int64_t q = 0; q < map.T; ++q) {
    out += pad_left(labels[q], kWidth);
    for (int64_t k = 0; k < map.T; ++k) {
      std::snprintf(cell, sizeof cell, "%*.3f", int(kWidth), double(map.weights[q * map.T + k]));
      out += cell;
    }
    out += '\n';
  }
  return out;
}

std::string attention_grid_svg(const std::vector<std::string>& labels, const std::vector<AttentionMap>& maps,
                               int columns) {
  const int64_t T = maps.empty() ? 0 : maps[0].T;
  columns = std::max(1, std::min(columns, int(maps.size())));
  const int rows = int((maps.size() + size_t(columns) - 1) / size_t(columns));
  // Cells shrink as the prompt grows, so a 64-character prompt still fits a screen.
  const double cell = std::clamp(360.0 / double(std::max<int64_t>(T, 1)), 6.0, 22.0);
  const double font = std::min(cell * 0.75, 12.0), label = font * 1.6 + 4;
  const double panel_w = label + cell * double(T) + 24, panel_h = 22 + label + cell * double(T) + 16;
  const double legend_w = 70, width = 16 + panel_w * columns + legend_w, height = 16 + panel_h * rows + 8;
  Svg svg(width, height);
  for (size_t m = 0; m < maps.size(); ++m) {
    const AttentionMap& map = maps[m];
    const double x0 = 16 + panel_w * double(m % size_t(columns)), y0 = 16 + panel_h * double(m / size_t(columns));
    svg.text(x0 + label, y0 + 12, map.title, 13, "start", "font-weight=\"bold\"");
    const double gx = x0 + label, gy = y0 + 22 + label;  // the grid's top-left corner
    for (int64_t k = 0; k < T; ++k)                       // key labels along the top
      svg.text(gx + cell * (double(k) + 0.5), gy - 4, labels[k], font, "middle");
    for (int64_t q = 0; q < T; ++q) {
      svg.text(gx - 4, gy + cell * (double(q) + 0.7), labels[q], font, "end");
      for (int64_t k = 0; k < T; ++k) {
        const float w = map.weights[q * T + k];
        // Masked cells (keys after the query) in grey: not "attends a little", but "cannot see".
        svg.rect(gx + cell * double(k), gy + cell * double(q), cell, cell, k > q ? "#e8e8e8" : color_scale(w));
        char tip[96];
        std::snprintf(tip, sizeof tip, "query %lld, key %lld: %.3f", (long long)q, (long long)k, double(w));
        svg.title(tip);
      }
    }
    svg.rect(gx, gy, cell * double(T), cell * double(T), "none", "stroke=\"#888\" stroke-width=\"0.5\"");
  }
  // The colour scale: 0 at the bottom, 1 at the top.
  const double lx = width - legend_w + 10, ly = 16 + 22 + label, lh = std::max(120.0, cell * double(T));
  for (int i = 0; i < 50; ++i) svg.rect(lx, ly + lh * (1 - (i + 1) / 50.0), 14, lh / 50.0 + 0.5, color_scale(i / 49.0));
  svg.rect(lx, ly, 14, lh, "none", "stroke=\"#888\" stroke-width=\"0.5\"");
  for (double v : {0.0, 0.5, 1.0}) svg.text(lx + 18, ly + lh * (1 - v) + 4, short_number(v), 11);
  svg.text(lx, ly - 8, "weight", 11);
  return svg.str();
}

}  // namespace folio::viz
