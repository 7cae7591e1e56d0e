#pragma once
// A small SVG writer: enough for the heatmaps and line plots folio draws, as plain
// SVG 1.1 that any browser renders and any XML parser reads.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace folio::viz {

// `s` with & < > " ' escaped, and what no XML document may hold replaced by U+FFFD:
// control characters but tab and newline, U+FFFE and U+FFFF, and each byte that is
// not part of a valid UTF-8 character (a label of the model's own tokens, or a run
// directory's name in another encoding).
std::string xml_escape(std::string_view s);

// A colour for v in [0, 1] on a perceptually even scale from pale yellow (0) through
// green and blue to dark purple (1), as "#rrggbb". Values outside are clamped.
std::string color_scale(double v);

// A number with at most `digits` significant digits and no trailing zeros: 1.5, 0.001, 2000.
std::string short_number(double v, int digits = 3);

class Svg {
 public:
  Svg(double width, double height);
  void rect(double x, double y, double w, double h, std::string_view fill, std::string_view extra = "");
  // anchor: "start", "middle" or "end".
  void text(double x, double y, std::string_view s, double size, std::string_view anchor = "start",
            std::string_view extra = "");
  void line(double x1, double y1, double x2, double y2, std::string_view stroke, double width = 1,
            std::string_view extra = "");
  void polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke, double width,
                std::string_view extra = "");
  void title(std::string_view tooltip);  // a <title> for the element drawn just before (hover text)
  std::string str() const;               // the whole document

 private:
  double width_, height_;
  std::string body_;
};

}  // namespace folio::viz
