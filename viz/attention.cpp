#include "viz/attention.h"

#include <algorithm>
#include <cstdio>

#include "viz/svg.h"

namespace folio::viz {

namespace {

// The terminal columns a code point takes: 0 for combining marks and zero-width
// characters, 2 for East Asian wide and fullwidth characters and emoji (Unicode's
// East_Asian_Width W and F, the blocks wcwidth() counts as 2), else 1.
int columns_of(char32_t c) {
  const auto in = [c](char32_t lo, char32_t hi) { return c >= lo && c <= hi; };
  if (in(0x0300, 0x036F) || in(0x0483, 0x0489) || in(0x0591, 0x05BD) || in(0x200B, 0x200F) || in(0x20D0, 0x20FF) ||
      in(0xFE00, 0xFE0F) || in(0xFE20, 0xFE2F) || in(0xE0100, 0xE01EF))
    return 0;
  if (in(0x1100, 0x115F) || in(0x2E80, 0x303E) || in(0x3041, 0x33FF) || in(0x3400, 0x4DBF) || in(0x4E00, 0x9FFF) ||
      in(0xA000, 0xA4CF) || in(0xAC00, 0xD7A3) || in(0xF900, 0xFAFF) || in(0xFE30, 0xFE4F) || in(0xFF00, 0xFF60) ||
      in(0xFFE0, 0xFFE6) || in(0x1F300, 0x1F64F) || in(0x1F900, 0x1F9FF) || in(0x20000, 0x2FFFD) ||
      in(0x30000, 0x3FFFD))
    return 2;
  return 1;
}

// The columns `s` (UTF-8, as visible_token writes it: whole characters) takes on a
// terminal.
size_t columns_of(const std::string& s) {
  size_t cols = 0;
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    char32_t c = n == 1 ? b : b & (0x7F >> n);
    for (size_t j = 1; j < n && i + j < s.size(); ++j) c = (c << 6) | (static_cast<unsigned char>(s[i + j]) & 0x3F);
    cols += size_t(columns_of(c));
    i += n;
  }
  return cols;
}

// Pads `s` on the left to `width` terminal columns.
std::string pad_left(const std::string& s, size_t width) {
  const size_t cols = columns_of(s);
  std::string out(width > cols ? width - cols : 0, ' ');
  return out += s;
}

}  // namespace

std::string attention_table(const std::vector<std::string>& labels, const AttentionMap& map) {
  // A weight takes 5 columns ("0.123"); each column is as wide as its key's label and
  // a space, so a long or wide label ("<0xE2>", a word, a CJK character) never runs
  // into its neighbour or pushes the weights below it out of line.
  constexpr size_t kWidth = 6;
  size_t label_width = kWidth;
  std::vector<size_t> width(size_t(map.T));  // (T,) each key column's
  for (int64_t k = 0; k < map.T; ++k) {
    const size_t cols = columns_of(labels[size_t(k)]);
    label_width = std::max(label_width, cols);
    width[size_t(k)] = std::max(kWidth, cols + 1);
  }
  std::string out = map.title + " (rows: queries, columns: keys)\n" + std::string(label_width, ' ');
  for (int64_t k = 0; k < map.T; ++k) out += pad_left(labels[size_t(k)], width[size_t(k)]);
  out += '\n';
  char cell[32];
  for (int64_t q = 0; q < map.T; ++q) {
    out += pad_left(labels[size_t(q)], label_width);
    for (int64_t k = 0; k < map.T; ++k) {
      std::snprintf(cell, sizeof cell, "%*.3f", int(width[size_t(k)]), double(map.weights[q * map.T + k]));
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
