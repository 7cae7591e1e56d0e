#pragma once
// Shared by the benchmark programs: the thread-count option, aligned scratch buffers,
// and a reporter that forwards to Google Benchmark's own (console, json or csv, as
// --benchmark_format asks) while keeping every run, so main() can print a summary.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <benchmark/benchmark.h>

#include "autograd/parallel.h"

namespace folio::bench {

// --threads=N (removed from argv) or FOLIO_BENCH_THREADS=N; 0 or absent: folio's
// default (OMP_NUM_THREADS if set, else all cores).
// Sets folio's (and so oneDNN's: one OpenMP runtime) thread count, and returns it.
inline int setup_threads(int& argc, char** argv) {
  int n = 0;
  if (const char* env = std::getenv("FOLIO_BENCH_THREADS")) n = std::atoi(env);
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0)
      n = std::atoi(argv[i] + 10);
    else
      argv[out++] = argv[i];
  }
  argc = out;
  argv[argc] = nullptr;
  folio::set_num_threads(n);
  const int threads = folio::num_threads();
  benchmark::AddCustomContext("folio_threads", std::to_string(threads));
  return threads;
}

// main() of a bench whose benchmarks register themselves (BENCHMARK(...)): --threads=N,
// then Google Benchmark's own flags.
inline int run_registered(int argc, char** argv) {
  setup_threads(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// A 64-byte aligned float buffer filled with uniform values in [-1, 1).
struct Buffer {
  float* p = nullptr;
  size_t n = 0;
  explicit Buffer(size_t count, uint32_t seed = 1) : n(count) {
    p = static_cast<float*>(std::aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64));
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) p[i] = dist(gen);
  }
  ~Buffer() { std::free(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* data() const { return p; }
};

// The format Google Benchmark would print in, read from argv as it would.
inline std::string display_format(int argc, char** argv) {
  std::string f = "console";
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--benchmark_format=", 19) == 0) f = argv[i] + 19;
  return f;
}

// Forwards to the reporter Google Benchmark would have made, and keeps the runs.
class CollectingReporter : public benchmark::BenchmarkReporter {
 public:
  explicit CollectingReporter(const std::string& format) {
    if (format == "json") {
      inner_ = std::make_unique<benchmark::JSONReporter>();
    } else if (format == "csv") {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      inner_ = std::make_unique<benchmark::CSVReporter>();
#pragma GCC diagnostic pop
    } else {
      const bool color = isatty(STDOUT_FILENO);
      inner_ = std::make_unique<benchmark::ConsoleReporter>(
          color ? benchmark::ConsoleReporter::OO_Color : benchmark::ConsoleReporter::OO_None);
    }
  }
  bool ReportContext(const Context& c) override { return inner_->ReportContext(c); }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) runs_.push_back(r);
    inner_->ReportRuns(runs);
  }
  void Finalize() override { inner_->Finalize(); }
  const std::vector<Run>& runs() const { return runs_; }

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> inner_;
  std::vector<Run> runs_;
};

// Extra aggregates over repetitions: on a shared machine other processes only ever
// slow a run down, so the best repetition ("max" GFLOP/s, "min" time) is the most
// stable estimate of what the code itself can do; the median shows the typical run.
inline benchmark::internal::Benchmark* add_min_max(benchmark::internal::Benchmark* b) {
  return b
      ->ComputeStatistics("min",
                          [](const std::vector<double>& v) {
                            return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
                          })
      ->ComputeStatistics("max", [](const std::vector<double>& v) {
        return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
      });
}

// The real time of one iteration of `benchmark`, in seconds: its `aggregate` over
// repetitions when there are aggregates, else the first plain run's.
inline bool time_of(const std::vector<benchmark::BenchmarkReporter::Run>& runs, const std::string& benchmark,
                    const std::string& aggregate, double& seconds) {
  bool found = false;
  for (const auto& r : runs) {
    if (r.error_occurred || r.run_name.function_name != benchmark) continue;
    const bool aggregate_run = r.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate;
    if (aggregate_run ? r.aggregate_name != aggregate : found) continue;
    seconds = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
    found = true;
    if (aggregate_run) return true;
  }
  return found;
}

// The counter `name` of the benchmark registered as `benchmark`: its `aggregate`
// ("median", "max", ...) over repetitions when there are aggregates, else the value
// of the (first) plain run.
inline bool counter_of(const std::vector<benchmark::BenchmarkReporter::Run>& runs,
                       const std::string& benchmark, const std::string& name,
                       const std::string& aggregate, double& value) {
  bool found = false;
  for (const auto& r : runs) {
    if (r.error_occurred || r.run_name.function_name != benchmark) continue;
    const auto it = r.counters.find(name);
    if (it == r.counters.end()) continue;
    if (r.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate) {
      if (r.aggregate_name == aggregate) {
        value = it->second.value;
        return true;
      }
    } else if (!found) {
      value = it->second.value;  // the first plain run, unless the aggregate turns up
      found = true;
    }
  }
  return found;
}

}  // namespace folio::bench
