// folio.load and what a loaded Model answers without generating: its config and
// tokenizer, the logits of ids, the loss on a text (as folio eval computes it), the
// attention weights (as folio attention shows them), its parameters as numpy views,
// and save() to a checkpoint. Every call into the model releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "data/attention_prompt.h"
#include "python/bindings.h"

namespace folio::python {

namespace {

// The tokenizer of a loaded model, shared with it.
struct TokenizerRef {
  std::shared_ptr<const Tokenizer> t;
};

LoadedPtr load(const py::handle& path_obj) {
  const std::string path = path_argument(path_obj, "[load] path");  // a str or a pathlib.Path
  auto loaded = std::make_shared<Loaded>();
  py::gil_scoped_release nogil;
  try {
    loaded->ck = load_model(path);
  } catch (const Error& e) {
    std::error_code ec;
    if (!std::filesystem::exists(model_file(path), ec)) throw FileMissing(e.what());
    throw;
  }
  loaded->ck.model->eval();
  return loaded;
}

const nn::GPT& model_of(const Loaded& l) { return *l.ck.model; }

// ids (T) -> logits (T, V)
py::array_t<float> logits(const LoadedPtr& l, const py::handle& ids_obj) {
  const nn::GPTConfig& c = model_of(*l).config();
  const Ids ids = ids_array(ids_obj, c.vocab_size, "[logits] ids", 1);  // (T)
  const int64_t T = ids.shape[0], V = c.vocab_size;
  if (T > c.block_size)
    throw Error(cat("[logits] ids has ", T, " tokens, more than the model's context (block_size ", c.block_size, ")"));
  py::array_t<float> out({T, V});  // (T, V)
  float* dst = out.mutable_data();
  py::gil_scoped_release nogil;
  std::lock_guard lock(l->busy);
  NoGradGuard no_grad;
  const Tensor x = model_of(*l).forward(ids.values, 1, T).logits;  // (1, T, V)
  std::memcpy(dst, x.data(), size_t(T * V) * sizeof(float));
  return out;
}

// The mean cross-entropy over the text's non-overlapping windows of block_size tokens
// (each predicting the next), summed as folio eval sums them; a text shorter than a
// window is one window of all its tokens.
py::dict loss(const LoadedPtr& l, const py::handle& text_obj) {
  const std::string text = text_argument(text_obj, "[loss] text");
  const Tokenizer& tok = *l->ck.tokenizer;
  double mean = 0;
  int64_t windows = 0, T = 0, bytes = 0;
  {
    py::gil_scoped_release nogil;
    const std::vector<int32_t> ids = tok.encode(text);
    const int64_t n = int64_t(ids.size());
    if (n < 2) throw Error(cat("[loss] text has ", n, " tokens: at least 2 are needed, one to predict from and one to predict"));
    T = std::min(model_of(*l).config().block_size, n - 1);
    windows = (n - 1) / T;
    std::lock_guard lock(l->busy);
    NoGradGuard no_grad;
    constexpr int64_t kBatch = 32;  // windows per forward pass, as folio eval's default
    double total = 0;               // nats, summed over windows of mean losses
    for (int64_t w = 0; w < windows; w += kBatch) {
      const int64_t B = std::min(kBatch, windows - w);
      const std::span<const int32_t> x(ids.data() + w * T, size_t(B * T)), y(ids.data() + w * T + 1, size_t(B * T));
      total += double(model_of(*l).forward(x, B, T, y).loss.item()) * double(B);
      // Ctrl-C reaches Python between batches (a signal is only seen with the GIL held):
      // without it, a long text's loss ran to its end and then raised KeyboardInterrupt.
      check_signals();
    }
    mean = total / double(windows);
    for (int64_t i = 1; i <= windows * T; ++i) bytes += int64_t(tok.token_bytes(ids[size_t(i)]).size());
  }
  const double nats = mean * double(windows * T);
  py::dict out;
  out["nats_per_token"] = mean;
  out["bits_per_byte"] = nats / std::log(2.0) / double(std::max<int64_t>(bytes, 1));
  out["tokens"] = windows * T;  // predicted
  out["bytes"] = bytes;         // of the predicted tokens' text
  out["windows"] = windows;
  out["block_size"] = T;
  return out;
}

// prompt -> the weights of every layer and head, (L, H, T, T): rows are queries.
py::array_t<float> attention(const LoadedPtr& l, const py::handle& prompt_obj) {
  const nn::GPTConfig& c = model_of(*l).config();
  std::vector<int32_t> ids = l->ck.tokenizer->encode(text_argument(prompt_obj, "[attention] prompt"));
  if (ids.empty()) throw Error("[attention] prompt is empty: give at least one character of text to look at");
  // What folio attention shows: the BOS first where the tokenizer asks for it (a model
  // imported from a llama-family GGUF), and the last block_size tokens, the ones the
  // model attends over when it continues the prompt. Before, the BOS was left out here.
  ids = attention_ids(*l->ck.tokenizer, std::move(ids), c.block_size);
  const int64_t T = int64_t(ids.size()), L = c.n_layer, H = c.n_head;
  py::array_t<float> out({L, H, T, T});  // (L, H, T, T)
  float* dst = out.mutable_data();
  py::gil_scoped_release nogil;
  std::lock_guard lock(l->busy);
  NoGradGuard no_grad;
  std::vector<Tensor> weights;  // per layer (1, H, T, T)
  model_of(*l).forward(ids, 1, T, {}, &weights);
  for (int64_t i = 0; i < L; ++i) std::memcpy(dst + i * H * T * T, weights[size_t(i)].data(), size_t(H * T * T) * sizeof(float));
  return out;
}

// Writes the model where folio generate --checkpoint, folio export and folio.load read
// it: the checkpoint folio train writes (io/checkpoint.h's save_model: the weights, the
// config, the tokenizer and the step it was loaded at), atomically (written beside the
// path, then renamed over it: never a half-written file). Without it, weights changed
// through parameters(writable=True) could not leave the process. What is at the path is
// kept unless `overwrite`; what is not a regular file (a directory, a link, a device) is
// refused either way, as the commands refuse it (cli/outputs.h): the rename would replace it.
void save(const LoadedPtr& l, const py::handle& path_obj, bool overwrite) {
  namespace fs = std::filesystem;
  const std::string path = path_argument(path_obj, "[save] path");
  if (path.empty()) throw Error("[save] path is empty: give the checkpoint file's path (out.safetensors)");
  std::error_code ec;
  const fs::file_status there = fs::symlink_status(path, ec);
  if (fs::is_directory(there))
    throw Error(cat("[save] ", path, " is a directory: give a file's path (",
                    (fs::path(path) / "model.safetensors").string(),
                    " is where folio.load and --checkpoint read a run directory's model)"));
  if (fs::exists(there) && !fs::is_regular_file(there))
    throw Error(cat("[save] ", path, " is not a regular file (a link, a device, a FIFO): the checkpoint is written "
                    "beside it and renamed over it, which would replace it; give a regular file's path"));
  if (fs::exists(there) && !overwrite) {
    PyErr_SetString(PyExc_FileExistsError,
                    cat("[save] ", path, " already exists: overwrite=True replaces it, or give another path").c_str());
    throw py::error_already_set();
  }
  const fs::path dir = fs::absolute(path, ec).parent_path();
  if (!fs::is_directory(dir, ec))
    throw FileMissing(cat("[save] ", path, ": the directory ", dir.string(), " does not exist"));
  py::gil_scoped_release nogil;
  std::lock_guard lock(l->busy);  // no write through the model while it is read
  save_model(path, model_of(*l), *l->ck.tokenizer, l->ck.step);
}

// {name: view of the parameter's memory}; each view holds the model.
py::dict parameters(const LoadedPtr& l, bool writable) {
  py::dict out;
  for (const auto& [name, t] : model_of(*l).named_parameters()) {
    std::vector<py::ssize_t> shape;
    for (int d = 0; d < t.ndim(); ++d) shape.push_back(t.size(d));
    const py::capsule owner(new LoadedPtr(l), [](void* p) { delete static_cast<LoadedPtr*>(p); });
    py::array_t<float> view(shape, t.data(), owner);
    if (!writable) view.attr("setflags")(py::arg("write") = false);
    out[py::str(name)] = view;
  }
  return out;
}

void bind_tokenizer(py::module_& m) {
  py::class_<TokenizerRef>(m, "Tokenizer", "A model's tokenizer: text to token ids and back.")
      .def(
          "encode", [](const TokenizerRef& r, const py::handle& text) { return r.t->encode(text_argument(text, "[encode] text")); },
          py::arg("text"),
          "The token ids of a text.\n\nArgs:\n    text: a str. A character the vocabulary lacks raises ValueError.\n\n"
          "Returns:\n    list[int]")
      .def(
          "decode",
          [](const TokenizerRef& r, const py::handle& ids) {
            // No ids are no text, as encode("") is [] (a prompt, unlike this, needs a token).
            return utf8_text(r.t->decode(ids_argument(ids, r.t->vocab_size(), "[decode] ids", /*allow_empty=*/true)));
          },
          py::arg("ids"),
          "The text of token ids.\n\nArgs:\n    ids: a list of ints or a 1-D integer array, each below vocab_size.\n\n"
          "Returns:\n    str (a byte that is not part of a whole character shows as U+FFFD)")
      .def_property_readonly("vocab_size", [](const TokenizerRef& r) { return r.t->vocab_size(); },
                             "The number of token ids.")
      .def_property_readonly(
          "end_of_text", [](const TokenizerRef& r) { return r.t->end_of_text(); },
          "The id that separates documents (an int), or None when the tokenizer has none.")
      .def_property_readonly("kind", [](const TokenizerRef& r) { return std::string(r.t->kind()); },
                             "\"char\", \"spm\" or \"ids\".")
      .def("__repr__", [](const TokenizerRef& r) { return cat("<folio.Tokenizer ", r.t->describe(), ">"); });
}

}  // namespace

void bind_model(py::module_& m) {
  bind_tokenizer(m);
  py::class_<Loaded, LoadedPtr> model(m, "Model", "A trained model, loaded with folio.load(path).");
  model.def_property_readonly(
           "config",
           [](const Loaded& l) { return config_dict(model_of(l).config()); },
           "The model's options as a dict (block_size, n_layer, n_head, n_embd, vocab_size, ...), as saved.")
      .def_property_readonly("tokenizer", [](const Loaded& l) { return TokenizerRef{l.ck.tokenizer}; },
                             "The model's Tokenizer.")
      .def_property_readonly("step", [](const Loaded& l) { return l.ck.step; }, "The training step it was saved at.")
      .def_property_readonly("path", [](const Loaded& l) { return l.ck.path; }, "The .safetensors file it came from.")
      .def("logits", &logits, py::arg("ids"),
           "The next-token logits at every position of a sequence.\n\n"
           "Args:\n    ids: token ids, a list of ints or a 1-D integer array of T <= block_size.\n\n"
           "Returns:\n    numpy.ndarray of float32, shape (T, V): row t scores the token after ids[t].")
      .def("loss", &loss, py::arg("text"),
           "The model's cross-entropy on a text, as folio eval computes it: the mean over the\n"
           "non-overlapping windows of block_size tokens (a shorter text is one window).\n\n"
           "Args:\n    text: a str of at least 2 tokens.\n\n"
           "Returns:\n    dict: nats_per_token, bits_per_byte (of the predicted tokens' UTF-8 text), tokens\n"
           "    (predicted), bytes, windows, block_size (the window's length). Ctrl-C interrupts it between\n"
           "    forward passes (of 32 windows each).")
      .def("attention", &attention, py::arg("prompt"),
           "The causal attention weights of the model's forward pass over a prompt, as folio\n"
           "attention shows them (after the softmax, no dropout).\n\n"
           "Args:\n    prompt: a str; a model whose tokenizer asks for a BOS before prompts (one imported from a\n"
           "        GGUF) gets it first, as folio attention puts it; a prompt longer than block_size tokens\n"
           "        is looked at by its last block_size.\n\n"
           "Returns:\n    numpy.ndarray of float32, shape (n_layer, n_head, T, T): [l, h, query, key].")
      .def("parameters", &parameters, py::arg("writable") = false,
           "The model's parameters by name, as numpy views of its memory (no copy).\n\n"
           "Args:\n    writable: False (the default) gives read-only views; True lets writes change the\n"
           "        model, seen by its next call.\n\n"
           "Returns:\n    dict[str, numpy.ndarray] of float32, in the checkpoint's names. Each view keeps the\n"
           "    model's memory alive, also after the Model is gone.")
      .def("save", &save, py::arg("path"), py::arg("overwrite") = false,
           "Writes the model as a checkpoint that folio generate --checkpoint, folio export and folio.load\n"
           "read: the file folio train writes (weights, config, tokenizer, and the step it was loaded at),\n"
           "with the weights as they are now (changed through parameters(writable=True) too).\n\n"
           "Args:\n    path: the .safetensors file to write, a str or an os.PathLike. It is written beside the\n"
           "        path and renamed over it: a failed or interrupted save leaves no half-written file.\n"
           "    overwrite: replace a file already at path (without it, FileExistsError naming it).\n\n"
           "Raises:\n    FileExistsError, FileNotFoundError (no such directory), ValueError (a directory or\n"
           "    another thing than a regular file at path, or a failed write, with the system's reason).")
      .def("__repr__", [](const Loaded& l) {
        const nn::GPTConfig& c = model_of(l).config();
        return cat("<folio.Model ", l.ck.path, ": step ", l.ck.step, ", ", c.n_layer, " layers, ", c.n_head, " heads, ",
                   c.n_embd, " channels, context ", c.block_size, ", ", l.ck.tokenizer->describe(), ">");
      });
  bind_generate(model);
  m.def("load", &load, py::arg("path"),
        "Loads a model from a run directory (its model.safetensors) or a .safetensors checkpoint.\n\n"
        "Args:\n    path: a run directory, or a checkpoint file (RUN/best.safetensors): a str or an os.PathLike.\n\n"
        "Returns:\n    Model. A missing file raises FileNotFoundError; a damaged one, ValueError.");
}

}  // namespace folio::python
