#pragma once
// The ranks of one run must be given the same options and the same data. Ranks that
// differ (a launch with a command line per rank, a recipe or a data file that is not the
// same on every host) call the collectives in another order and wait for each other
// until --comm-timeout, whose message blames a dead rank or the network, or drift apart
// until the weights' checksum at the next evaluation, which names no option. The trainer
// compares them when it starts, one by one, and names the first that differs.
#include <string>
#include <utility>
#include <vector>

namespace folio {

struct TrainOptions;

// (name, value) pairs, the same names in the same order on every rank: fails ("mpi") on
// every rank when a value is not the same on all of them, naming the first such pair
// with rank 0's value and this rank's. Alone: nothing.
void check_same_on_every_rank(const std::vector<std::pair<std::string, std::string>>& named);

// The options every rank must share before the run reads anything: those that shape
// the steps, the evaluations and the calls between the ranks ("--eval-interval", "250").
// Not the paths (--data, --init-from, --config: a host may keep its files elsewhere;
// what they hold is compared once read), --threads (each rank's own) or the progress'
// --log-interval.
std::vector<std::pair<std::string, std::string>> options_to_share(const TrainOptions& o);

}  // namespace folio
