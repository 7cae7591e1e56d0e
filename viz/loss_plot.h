#pragma once
// Loss curves as an SVG line plot: train (dashed) and val (solid) loss against step,
// one colour per run, with the elapsed wall time under the step axis; or against
// training time, which puts runs of different step speeds (folio and the PyTorch peer)
// on one axis.
#include <cstdint>
#include <string>
#include <vector>

namespace folio::viz {

struct LossPoint {
  int64_t step = 0;
  double train = 0, val = 0, elapsed_s = 0;
  double train_s = -1;  // the steps' training time (log.csv's train_s); -1: the log has none
};

struct LossCurve {
  std::string name;  // the legend's label
  std::vector<LossPoint> points;
};

// Reads a run's log.csv (step,train_loss,val_loss,lr,tokens_per_sec,elapsed_s[,...]). Throws
// folio::Error naming the file and line when it is not such a file.
LossCurve read_loss_log(const std::string& path, const std::string& name);

// What the horizontal axis counts: steps, or training seconds (train_s where the log
// has it, else the wall time).
enum class PlotAxis { step, time };
std::string loss_plot_svg(const std::vector<LossCurve>& curves, PlotAxis axis = PlotAxis::step);

}  // namespace folio::viz
