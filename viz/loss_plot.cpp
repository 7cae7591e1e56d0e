#include "viz/loss_plot.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/error.h"
#include "viz/svg.h"

namespace folio::viz {
namespace {

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out(1);
  for (char c : line)
    if (c == sep) out.emplace_back();
    else out.back().push_back(c);
  return out;
}

}  // namespace

LossCurve read_loss_log(const std::string& path, const std::string& name, const std::string& column) {
  std::ifstream in(path);
  if (!in) fail("plot", path, ": cannot open (expected a run's log.csv)");
  LossCurve curve{name, {}};
  std::string line;
  if (!std::getline(in, line) || line.rfind("step,train_loss,val_loss", 0) != 0)
    fail("plot", path, ": not a folio log.csv (its first line should be step,train_loss,val_loss,...)");
  const std::vector<std::string> header = split(line, ',');
  // Columns absent from older logs.
  const auto train_s = std::find(header.begin(), header.end(), "train_s");
  const auto val_bpb = std::find(header.begin(), header.end(), "val_bpb");
  const auto wanted = std::find(header.begin(), header.end(), column);
  if (!column.empty() && wanted == header.end())
    fail("plot", path, ": no column ", column, " (it has ", line, ")");
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    std::istringstream row(line);
    LossPoint p;
    double lr = 0, tokens_per_sec = 0;
    char c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0;
    // Six numbers; columns added later (val_bpc) follow them.
    if (!(row >> p.step >> c1 >> p.train >> c2 >> p.val >> c3 >> lr >> c4 >> tokens_per_sec >> c5 >> p.elapsed_s) ||
        c1 != ',' || c2 != ',' || c3 != ',' || c4 != ',' || c5 != ',' || !(row.eof() || row.peek() == ','))
      fail("plot", path, ":", number, ": expected comma-separated numbers, got '", line, "'");
    if (train_s != header.end()) {
      const std::vector<std::string> cells = split(line, ',');
      const size_t at = size_t(train_s - header.begin());
      char* end = nullptr;
      p.train_s = at < cells.size() ? std::strtod(cells[at].c_str(), &end) : -1;
      if (at >= cells.size() || end != cells[at].c_str() + cells[at].size() || !(p.train_s >= 0))
        fail("plot", path, ":", number, ": expected the training seconds in column ", at + 1, " (train_s), got '",
             line, "'");
    }
    if (val_bpb != header.end()) {  // "nan" where the run had no byte counts
      const std::vector<std::string> cells = split(line, ',');
      const size_t at = size_t(val_bpb - header.begin());
      if (at < cells.size()) p.val_bpb = std::strtod(cells[at].c_str(), nullptr);
    }
    if (!column.empty()) {  // "nan" where the run had no figure (no step since the last row)
      const std::vector<std::string> cells = split(line, ',');
      const size_t at = size_t(wanted - header.begin());
      if (at < cells.size()) p.column = std::strtod(cells[at].c_str(), nullptr);
    }
    curve.points.push_back(p);
  }
  if (curve.points.empty()) fail("plot", path, ": no evaluations logged yet");
  return curve;
}

namespace {

// About `count` round tick values covering [lo, hi], and the decimals their labels
// need: as many as the spacing has, so that neighbours never read alike (at three
// significant digits, ticks 0.005 apart showed 1.49, 1.49, 1.5, 1.5).
struct Ticks {
  std::vector<double> at;
  int decimals = 0;
};

Ticks ticks(double lo, double hi, int count) {
  const double raw = (hi - lo) / std::max(count, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw > 0 ? raw : 1.0)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  Ticks out;
  while (out.decimals < 15) {  // the fewest decimals that write the step exactly
    const double scaled = step * std::pow(10.0, out.decimals);
    if (std::abs(scaled - std::round(scaled)) <= 1e-6 * scaled) break;
    ++out.decimals;
  }
  // Whole multiples of the step (not a sum of steps, whose rounding wrote 8.67e-19 for
  // 0), and 0 as 0, not -0.
  for (double k = std::ceil(lo / step); k * step <= hi + step * 1e-9; ++k) out.at.push_back(k == 0 ? 0.0 : k * step);
  return out;
}

// `t` with `decimals` decimals, less its trailing zeros: 1.495, 1.5, 1.505.
std::string tick_label(double t, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, t);
  std::string out = buf;
  if (out.find('.') != std::string::npos) {
    out.erase(out.find_last_not_of('0') + 1);
    if (out.back() == '.') out.pop_back();
  }
  return out;
}

std::string duration(double seconds) {
  const int s = int(std::lround(seconds));
  return s >= 60 ? std::to_string(s / 60) + "m" + (s % 60 < 10 ? "0" : "") + std::to_string(s % 60) + "s"
                 : std::to_string(s) + "s";
}

constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                                    "#17becf"};

}  // namespace

bool has_bits_per_byte(const LossCurve& curve) {
  return std::all_of(curve.points.begin(), curve.points.end(),
                     [](const LossPoint& p) { return std::isfinite(p.val_bpb) && std::isfinite(p.val) && p.val > 0; });
}

double elapsed_at(const LossCurve& curve, double step) {
  const std::vector<LossPoint>& points = curve.points;
  const auto after = std::lower_bound(points.begin(), points.end(), step,
                                      [](const LossPoint& p, double s) { return double(p.step) < s; });
  if (after == points.end()) return points.empty() ? 0.0 : points.back().elapsed_s;
  if (after == points.begin() || double(after->step) == step) return after->elapsed_s;
  const LossPoint& before = *(after - 1);
  const double f = (step - double(before.step)) / double(after->step - before.step);
  return before.elapsed_s + f * (after->elapsed_s - before.elapsed_s);
}

std::string loss_plot_svg(const std::vector<LossCurve>& curves, PlotAxis axis, PlotValue value,
                          const std::string& column) {
  const bool timed_axis = axis == PlotAxis::time, bits = value == PlotValue::bpb, col = value == PlotValue::column;
  for (const LossCurve& c : curves)
    if (bits && !has_bits_per_byte(c))
      fail("plot", c.name, ": its log has no val_bpb for every evaluation (a run logged before bits per byte "
           "were, or on token files that do not say how many bytes their tokens are)");
  auto at = [&](const LossPoint& p) {  // where a point sits on the horizontal axis
    return !timed_axis ? double(p.step) : p.train_s >= 0 ? p.train_s : p.elapsed_s;
  };
  // The figures drawn: the losses, or in bits per byte at the point's own ratio (the
  // val text's bits per byte per nat of loss, which the train loss shares).
  // A column is one line a run, drawn as the val curve is.
  auto val_of = [&](const LossPoint& p) { return col ? p.column : bits ? p.val_bpb : p.val; };
  auto train_of = [&](const LossPoint& p) {
    return col ? std::numeric_limits<double>::quiet_NaN() : bits ? p.train * p.val_bpb / p.val : p.train;
  };
  const std::string unit = col ? column : bits ? "bits per byte" : "loss";
  // The legend goes under the plot, a line per run, so it never hides a curve.
  constexpr double W = 760, left = 64, right = 24, top = 36, bottom = 76, legend_line = 18;
  const double H = 460 + legend_line * double(curves.size());
  const double plot_bottom = H - bottom - legend_line * double(curves.size());
  double max_x = 1, lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const LossCurve& c : curves)
    for (const LossPoint& p : c.points) {
      max_x = std::max(max_x, at(p));
      for (double v : {train_of(p), val_of(p)})
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  if (!(lo <= hi)) lo = 0, hi = 1;
  // A flat curve still gets a band around it: 0.01 of a loss, and 5% of a column's
  // size, whose scale may be far below 0.01 (an lr near 1e-4 drawn in a band of 0.02
  // was a flat line).
  const double size = std::max(std::abs(lo), std::abs(hi));
  const double pad = std::max((hi - lo) * 0.05, col && size > 0 ? size * 0.05 : 0.01);
  lo -= pad, hi += pad;
  auto X = [&](double step) { return left + (W - left - right) * step / max_x; };
  auto Y = [&](double loss) { return top + (plot_bottom - top) * (hi - loss) / (hi - lo); };

  Svg svg(W, H);
  svg.text(left, 22, unit + " against " + (timed_axis ? "training time" : "step") +
                         (col    ? " (from log.csv)"
                          : bits ? " (solid: val, dashed: train at the val text's bytes per token)"
                                 : " (solid: val, dashed: train)"),
           14, "start", "font-weight=\"bold\"");
  const Ticks vertical = ticks(lo, hi, 6);
  for (double t : vertical.at) {
    svg.line(left, Y(t), W - right, Y(t), "#e5e5e5");
    svg.text(left - 6, Y(t) + 4, tick_label(t, vertical.decimals), 11, "end");
  }
  // Step ticks, with the first run's elapsed time at that step beneath them. Seconds
  // ticks at fractions of a second (a short run's, 0.5 s or 2.5 s apart) keep their
  // decimals: rounded to whole seconds they read 0s 1s 1s 2s.
  const LossCurve* timed = curves.empty() ? nullptr : &curves[0];
  const Ticks horizontal = ticks(0, max_x, 8);
  for (double t : horizontal.at) {
    svg.line(X(t), top, X(t), plot_bottom, "#f0f0f0");
    const std::string label = !timed_axis                ? tick_label(t, horizontal.decimals)
                              : horizontal.decimals > 0 ? tick_label(t, horizontal.decimals) + "s"
                                                         : duration(t);
    svg.text(X(t), plot_bottom + 16, label, 11, "middle");
    if (!timed_axis && timed && t <= double(timed->points.back().step))
      svg.text(X(t), plot_bottom + 30, duration(elapsed_at(*timed, t)), 10, "middle", "fill=\"#777\"");
  }
  svg.rect(left, top, W - left - right, plot_bottom - top, "none", "stroke=\"#999\"");
  svg.text((left + W - right) / 2, plot_bottom + 50,
           timed_axis ? std::string("training time (the steps' seconds, evaluations excluded)")
                      : "step  (elapsed wall time of " + (timed ? timed->name : "") + " below)",
           12, "middle");
  for (size_t i = 0; i < curves.size(); ++i) {
    const LossCurve& c = curves[i];
    const std::string colour = kColours[i % std::size(kColours)];
    std::vector<std::pair<double, double>> train, val;
    for (const LossPoint& p : c.points) {
      if (std::isfinite(train_of(p))) train.emplace_back(X(at(p)), Y(train_of(p)));
      if (std::isfinite(val_of(p))) val.emplace_back(X(at(p)), Y(val_of(p)));
    }
    svg.polyline(train, colour, 1.5, "stroke-dasharray=\"5,4\" opacity=\"0.8\"");
    svg.polyline(val, colour, 2);
    const LossPoint& best = *std::min_element(c.points.begin(), c.points.end(),
                                              [](const LossPoint& a, const LossPoint& b) { return a.val < b.val; });
    const LossPoint& last = c.points.back();
    const double ly = plot_bottom + 76 + legend_line * double(i);
    svg.line(left, ly - 4, left + 24, ly - 4, colour, 2);
    const std::string figure = col ? cat(column, " ", short_number(last.column, 4), " at the last step")
                                   : cat("best val ", short_number(val_of(best), 4), bits ? " bits/byte" : "",
                                         " at step ", best.step);
    svg.text(left + 30, ly, cat(c.name, ": ", figure, ", ", last.step, " steps in ", duration(last.elapsed_s)), 11);
  }
  return svg.str();
}

}  // namespace folio::viz
