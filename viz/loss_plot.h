#pragma once
// Loss curves as an SVG line plot: train (dashed) and val (solid) loss against step,
// one colour per run, with the elapsed wall time under the step axis; or against
// training time, which puts runs of different step speeds (folio and the PyTorch peer)
// on one axis. The vertical axis is the loss per token, or bits per byte of text,
// which puts runs of different tokenizers (char and BPE) on one scale.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace folio::viz {

struct LossPoint {
  int64_t step = 0;
  double train = 0, val = 0, elapsed_s = 0;
  double train_s = -1;  // the steps' training time (log.csv's train_s); -1: the log has none
  // The val loss in bits per byte of text (log.csv's val_bpb); NaN: the log has none, or
  // its run's token files did not say how many bytes their tokens are.
  double val_bpb = std::numeric_limits<double>::quiet_NaN();
  // The column read_loss_log was asked for (grad_norm, clipped, ...); NaN: none, or
  // none at this evaluation.
  double column = std::numeric_limits<double>::quiet_NaN();
};

struct LossCurve {
  std::string name;  // the legend's label
  std::vector<LossPoint> points;
};

// Reads a run's log.csv (step,train_loss,val_loss,lr,tokens_per_sec,elapsed_s[,...]), and
// `column`'s figures if one is named (into LossPoint::column). Throws folio::Error naming
// the file and line when it is not such a file, or the column when it has none.
LossCurve read_loss_log(const std::string& path, const std::string& name, const std::string& column = "");

// What the horizontal axis counts: steps, or training seconds (train_s where the log
// has it, else the wall time).
enum class PlotAxis { step, time };
// What the vertical axis measures: the loss (nats a token), or bits per byte: val_bpb,
// and the train loss at the same ratio (the val text's tokens per byte; the log holds
// no train figure in bits). Every point of every curve must then have its val_bpb
// (has_bits_per_byte), else this throws. Or one column of the log, named `column`: a
// line a run (the gradient norm of a run that spiked and recovered, its rollbacks).
enum class PlotValue { loss, bpb, column };
bool has_bits_per_byte(const LossCurve& curve);
std::string loss_plot_svg(const std::vector<LossCurve>& curves, PlotAxis axis = PlotAxis::step,
                          PlotValue value = PlotValue::loss, const std::string& column = "");

// The wall time of `curve` at `step`, between its evaluations: the straight line from
// the one before to the one after (a step past the last gets the last's time).
double elapsed_at(const LossCurve& curve, double step);

}  // namespace folio::viz
