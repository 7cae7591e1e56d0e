// folio plot: the loss curves of one or more runs, overlaid in one SVG.
#include <cstdio>
#include <filesystem>

#include "cli/common.h"
#include "viz/loss_plot.h"

namespace folio::cli {
namespace {

void declare(po::options_description& opts) {
  opts.add_options()("run", po::value<std::vector<std::string>>()->composing(),
                     "a run directory (or its log.csv); the bare words after plot are runs too")
      ("out", with_default<std::string>("loss.svg"), "the SVG file to write")
      ("x", with_default<std::string>("step"),
       "the horizontal axis: step, or time (each run's training seconds, its log's train_s: runs of "
       "different speeds on one clock)")
      ("y", with_default<std::string>("loss"),
       "the vertical axis: loss (per token), bpb (bits per byte of text, the log's val_bpb: runs of different "
       "tokenizers, char and BPE, on one scale), or any column of log.csv, one line a run: grad_norm, clipped, "
       "skipped, rollbacks, lr, tokens_per_sec, ...");
  add_overwrite(opts);
}

std::function<int()> prepare(const po::variables_map& vm) {
  if (!vm.count("run")) throw UsageError("name at least one run: folio plot RUN [RUN...] --out FILE.svg");
  const std::string y = vm["y"].as<std::string>();
  const viz::PlotValue value = y == "bpb" ? viz::PlotValue::bpb : y == "loss" ? viz::PlotValue::loss : viz::PlotValue::column;
  const std::string column = value == viz::PlotValue::column ? y : "";
  std::vector<viz::LossCurve> curves;
  for (const std::string& run : vm["run"].as<std::vector<std::string>>()) {
    const std::filesystem::path p(run);
    const bool dir = std::filesystem::is_directory(p);
    const std::filesystem::path log = dir ? p / "log.csv" : p;
    // A bare log.csv (or a mistyped run's name) has no parent in its path: the working
    // directory names it, and absolute("") would throw a message that names nothing.
    const std::filesystem::path named = dir ? p : p.has_parent_path() ? p.parent_path() : ".";
    const std::string name = run_name(named.string());
    try {
      curves.push_back(viz::read_loss_log(log.string(), name, column));
    } catch (const Error& e) {  // a column it lacks: the flag was wrong
      if (column.empty() || std::string(e.what()).find(": no column ") == std::string::npos) throw;
      throw UsageError(cat("--y ", column, ": expected loss, bpb or a column of the log; ", e.what()));
    }
    if (value == viz::PlotValue::bpb && !viz::has_bits_per_byte(curves.back()))
      fail("plot", log.string(), ": no val_bpb for every evaluation (a run logged before bits per byte were, or on "
           "token files that do not say how many bytes their tokens are): plot it with --y loss");
  }
  const std::string x = vm["x"].as<std::string>();
  if (x != "step" && x != "time") throw UsageError(cat("--x must be step or time, got '", x, "'"));
  const viz::PlotAxis axis = x == "time" ? viz::PlotAxis::time : viz::PlotAxis::step;
  const std::string out = vm["out"].as<std::string>();
  check_output(vm, "--out " + out, out);
  return [=] {
    write_output(out, viz::loss_plot_svg(curves, axis, value, column), plural(int64_t(curves.size()), "run"));
    return 0;
  };
}

}  // namespace

const Command kPlot = {"plot", "overlay the loss curves of runs in one SVG",
                       "Draws train (dashed) and val (solid) loss against step for each run, from its\n"
                       "log.csv, one colour per run, with the first run's wall time under the steps:\n"
                       "  folio plot runs/a runs/b --out compare.svg\n"
                       "--y bpb draws bits per byte of text instead, for runs of different tokenizers;\n"
                       "--y COLUMN one column of the logs (--y grad_norm: the runs' gradient norms).",
                       declare, prepare, "run"};

}  // namespace folio::cli
