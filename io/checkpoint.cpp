#include "io/checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "io/folio_format.h"
#include "io/safetensors.h"

namespace folio {

std::string model_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return (std::filesystem::path(path) / "model.safetensors").string();
  return path;
}

void save_model(const std::string& file, const nn::GPT& model, const Tokenizer& tokenizer, int64_t step) {
  if (tokenizer.vocab_size() != model.config().vocab_size)
    fail("checkpoint", file, ": the tokenizer has ", tokenizer.vocab_size(), " tokens but the model's vocab_size is ",
         model.config().vocab_size);
  std::vector<NamedTensor> tensors;
  for (const auto& [name, t] : model.named_parameters()) tensors.push_back({name, t});
  Metadata metadata = folio_metadata("-model");
  metadata.push_back({"config", to_json(model.config()).dump()});
  for (auto& entry : tokenizer.metadata()) metadata.push_back(std::move(entry));
  metadata.push_back({"step", std::to_string(step)});
  save_safetensors(file, tensors, metadata);
}

namespace {

// __metadata__.step of a model checkpoint whose folio format was checked.
int64_t step_of(const SafetensorsMetadata& f, const std::string& where) {
  const Json step = metadata_json(f, "step", where);
  if (!step.is_int() || step.as_int() < 0) fail("checkpoint", where, ": __metadata__.step: expected an integer >= 0");
  return step.as_int();
}

// The config, tokenizer and step of f's header, checked against each other and
// against the sizes of the tensors it lists.
CheckpointHeader header_of(const SafetensorsMetadata& f, const std::string& where) {
  check_folio_format(f, where, "-model");
  CheckpointHeader h;
  h.path = where;
  h.config = model_config_from_json(metadata_json(f, "config", where), where);
  h.tokenizer = load_tokenizer(f.metadata, where);
  if (h.tokenizer->vocab_size() != h.config.vocab_size)
    fail("checkpoint", where, ": the tokenizer (", h.tokenizer->describe(), ") has ", h.tokenizer->vocab_size(),
         " tokens but config.vocab_size is ", h.config.vocab_size);
  h.step = step_of(f, where);
  // The file's tensors must add up to the configured model before it is allocated:
  // a header cannot make folio build a model larger than the file that describes it.
  int64_t in_file = 0;
  for (const auto& [name, shape] : f.shapes) in_file += shape.numel();
  if (in_file != h.config.parameter_count())
    fail("checkpoint", where, ": tensors hold ", in_file, " values but the config needs ", h.config.parameter_count());
  return h;
}

}  // namespace

CheckpointHeader load_checkpoint_header(const std::string& path) {
  const std::string where = model_file(path);
  return header_of(load_safetensors_metadata(where), where);
}

int64_t checkpoint_step(const std::string& path) {
  const std::string where = model_file(path);
  const SafetensorsMetadata f = load_safetensors_metadata(where);
  check_folio_format(f, where, "-model");
  return step_of(f, where);
}

ModelCheckpoint load_model(const std::string& path) {
  ModelCheckpoint ck;
  ck.path = model_file(path);
  const std::string& where = ck.path;
  const SafetensorsFile f = load_safetensors(where);
  CheckpointHeader h = header_of(f, where);
  ck.tokenizer = std::move(h.tokenizer);
  ck.step = h.step;
  const nn::GPTConfig& config = h.config;
  // Every parameter is read from the file below (or the load fails): no initial values.
  ck.model = std::make_unique<nn::GPT>(config, nn::Arena::to_be_loaded(config.parameter_count()));
  const auto params = ck.model->named_parameters();
  for (const auto& t : f.tensors) {
    bool known = false;
    for (const auto& [name, p] : params) known = known || name == t.name;
    if (!known) fail("checkpoint", where, ": tensor ", json_quote(t.name), " is not a parameter of this config");
  }
  for (const auto& [name, p] : params) {
    const Tensor* t = f.find(name);
    if (!t) fail("checkpoint", where, ": tensor ", name, " is missing for this config");
    if (t->shape() != p.shape())
      fail("checkpoint", where, ": tensor ", name, ": shape ", t->shape(), " but the config needs ", p.shape());
    check_finite(*t, name, where);
    std::copy(t->data(), t->data() + t->numel(), p.data());
    p.mark_modified();
  }
  return ck;
}

}  // namespace folio
