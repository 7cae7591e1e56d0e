#include "viz/svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "base/utf8.h"

namespace folio::viz {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  // A byte that is not part of a UTF-8 character, a control character (but tab and
  // newline), and U+FFFE and U+FFFF (EF BF BE/BF) are not XML text: a parser stops at
  // the first, and a browser draws nothing of the document.
  const auto replace = [&](unsigned char) { out += kReplacement; };
  const size_t cut = scan_utf8(
      s,
      [&](std::string_view c) {
        if (c.size() == 1 && (unsigned char)c[0] < 0x20 && c[0] != '\t' && c[0] != '\n') return replace(0);
        if (c == "\xEF\xBF\xBE" || c == "\xEF\xBF\xBF") return replace(0);
        switch (c[0]) {
          case '&': out += "&amp;"; break;
          case '<': out += "&lt;"; break;
          case '>': out += "&gt;"; break;
          case '"': out += "&quot;"; break;
          case '\'': out += "&apos;"; break;
          default: out += c;
        }
      },
      replace);
  for (size_t i = cut; i < s.size(); ++i) replace(0);  // a character cut off at the end
  return out;
}

std::string color_scale(double v) {
  // Stops of a yellow-green-blue-purple ramp (light to dark), interpolated linearly.
  static constexpr std::array<std::array<double, 3>, 6> stops = {{{255, 255, 217},
                                                                 {199, 233, 180},
                                                                 {65, 182, 196},
                                                                 {34, 94, 168},
                                                                 {37, 52, 148},
                                                                 {8, 29, 88}}};
  v = std::clamp(std::isfinite(v) ? v : 0.0, 0.0, 1.0) * double(stops.size() - 1);
  const size_t i = std::min(size_t(v), stops.size() - 2);
  const double f = v - double(i);
  char buf[8];
  int rgb[3];
  for (int c = 0; c < 3; ++c) rgb[c] = int(std::lround(stops[i][c] + f * (stops[i + 1][c] - stops[i][c])));
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return buf;
}

std::string short_number(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

namespace {
std::string num(double v) { return short_number(v, 6); }
}  // namespace

Svg::Svg(double width, double height) : width_(width), height_(height) {}

void Svg::rect(double x, double y, double w, double h, std::string_view fill, std::string_view extra) {
  body_ += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) +
           "\" fill=\"" + std::string(fill) + "\" " + std::string(extra) + "/>\n";
}

void Svg::text(double x, double y, std::string_view s, double size, std::string_view anchor, std::string_view extra) {
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + num(size) + "\" text-anchor=\"" +
           std::string(anchor) + "\" " + std::string(extra) + ">" + xml_escape(s) + "</text>\n";
}

void Svg::line(double x1, double y1, double x2, double y2, std::string_view stroke, double width,
               std::string_view extra) {
  body_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) +
           "\" stroke=\"" + std::string(stroke) + "\" stroke-width=\"" + num(width) + "\" " + std::string(extra) +
           "/>\n";
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke, double width,
                   std::string_view extra) {
  body_ += "<polyline fill=\"none\" stroke=\"" + std::string(stroke) + "\" stroke-width=\"" + num(width) + "\" " +
           std::string(extra) + " points=\"";
  for (const auto& [x, y] : points) body_ += num(x) + "," + num(y) + " ";
  body_ += "\"/>\n";
}

void Svg::title(std::string_view tooltip) {
  // Wraps the element just drawn: <rect .../> becomes <rect ...><title>..</title></rect>.
  const size_t end = body_.rfind("/>\n");
  if (end == std::string::npos) return;
  const size_t open = body_.rfind('<', end);
  const std::string tag = body_.substr(open + 1, body_.find(' ', open) - open - 1);
  body_.replace(end, 3, "><title>" + xml_escape(tooltip) + "</title></" + tag + ">\n");
}

std::string Svg::str() const {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" +
         num(width_) + "\" height=\"" + num(height_) + "\" viewBox=\"0 0 " + num(width_) + " " + num(height_) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n" + body_ + "</svg>\n";
}

}  // namespace folio::viz
