// This machine's memory bandwidth, STREAM's triad (bench/triad.h): the limit decode
// speed is held against (bench_generate reports decode as a fraction of it).
//   build/bench/bench_bandwidth --threads=1
//   build/bench/bench_bandwidth --threads=2
#include <cstdio>

#include "bench/bench_common.h"
#include "bench/triad.h"

int main(int argc, char** argv) {
  const int threads = folio::bench::setup_threads(argc, argv);
  const int64_t elements = argc > 1 ? std::atoll(argv[1]) : int64_t(1) << 25;
  const folio::bench::Triad t = folio::bench::triad(elements);
  std::printf("triad: %.2f GB/s (best of 10 passes of %.0f MB, %d threads)\n", t.gb_per_s, double(t.bytes) / 1e6,
              threads);
  return 0;
}
