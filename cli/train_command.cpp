// folio train as a function (front/train_command.h): the command's Command record
// (cli/train_cmd.cpp) behind an interface that does not show Boost.Program_options.
#include "front/train_command.h"

#include "cli/common.h"

namespace folio::front {
namespace {

// folio train's options as its --help declares them (without --help itself).
cli::po::options_description declared() {
  cli::po::options_description options;
  cli::kTrain.declare(options);
  return options;
}

}  // namespace

std::vector<TrainFlag> train_flags() {
  const cli::po::options_description options = declared();
  std::vector<TrainFlag> flags;
  for (const auto& o : options.options())
    flags.push_back({o->long_name(), o->semantic()->max_tokens() > 0, o->semantic()->is_composing()});
  return flags;
}

std::string nearest_train_flag(const std::string& name) { return cli::nearest_option(name, declared()); }

std::function<int()> prepare_train(const std::vector<std::string>& args) {
  std::vector<std::string> words{"train"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  cli::po::variables_map vm;
  try {
    if (!cli::parse(cli::kTrain, int(argv.size()), argv.data(), vm)) return [] { return 0; };  // --help: printed
    return cli::kTrain.prepare(vm);
  } catch (const cli::po::error& e) {  // the parsing library's own: a value of the wrong type
    throw Error(cat("[train] ", e.what()));
  }
}

}  // namespace folio::front
