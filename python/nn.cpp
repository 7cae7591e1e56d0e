// folio.nn: the modules of nn/ that the tutorials build, as thin handles on the C++
// classes: Linear, Head (one causal self-attention head), MultiHead and the GPT. Each
// is called on folio.Tensor values and gives Tensors, so .backward() reaches its
// parameters; parameters() hands out those very tensors (leaves that require grad),
// whose .numpy() views share the module's memory.
#include <pybind11/stl.h>

#include <algorithm>

#include "base/edit_distance.h"
#include "io/config_json.h"
#include "nn/transformer.h"
#include "python/bindings.h"

namespace folio::python {
namespace {

using nn::Module;

void require(bool ok, const char* what, const std::string& detail) {
  if (!ok) throw Error(cat(what, " ", detail));
}

// The dropout masks' generator of a standalone module: seeded from its seed, as the GPT
// seeds its own (config.seed ^ 0xd5), so one seed fixes weights and masks.
std::shared_ptr<Rng> dropout_rng(uint64_t seed) { return std::make_shared<Rng>(seed ^ 0xd5); }

// An attention module's forward (Head, MultiHead): out, or with the attention weights
// when asked, (out, weights).
template <class Attention>
py::object attend(const Attention& attention, const Tensor& x, bool return_weights) {
  Tensor weights;
  const Tensor out = attention.forward(x, return_weights ? &weights : nullptr);
  return return_weights ? py::object(py::make_tuple(out, weights)) : py::cast(out);
}

// GPT(**options): the defaults of a checkpoint's config, with the options given by name
// (n_layer=2, pos="rope", ...), checked by the checkpoint reader's own rules.
nn::GPTConfig gpt_config(const py::kwargs& options, uint64_t seed) {
  Json defaults = to_json(nn::GPTConfig{});
  Json::Object& fields = defaults.as_object();
  std::erase_if(fields, [](const auto& f) { return f.first == "seed"; });  // an argument of its own
  const py::module_ json = py::module_::import("json");
  for (const auto& [key_obj, value] : options) {
    const std::string key = py::str(key_obj);
    auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == key; });
    if (it == fields.end()) {
      std::string near, known;
      for (const auto& f : fields) {
        known += cat(known.empty() ? "" : ", ", f.first);
        if (near.empty() && edit_distance(key, f.first) <= 2) near = f.first;
      }
      throw Error(cat("[GPT] unknown option '", key, "'", near.empty() ? "" : cat(" (did you mean ", near, "?)"),
                      "; the options are ", known));
    }
    // numpy's scalars as the Python numbers they stand for, which json writes (it
    // refuses np.int64); a str stays text, and NaN stays refused below.
    py::object plain = py::reinterpret_borrow<py::object>(value);
    if (is_bool(value)) plain = py::bool_(PyObject_IsTrue(value.ptr()) == 1);
    else if (const std::optional<py::int_> i = integer_value(value)) plain = *i;
    else if (const std::optional<double> x = real_value(value)) plain = py::float_(*x);
    std::string text;
    try {
      text = py::str(json.attr("dumps")(plain, py::arg("allow_nan") = false));
    } catch (const py::error_already_set& e) {  // json: TypeError for a set, ValueError for NaN
      const std::string detail = cat("[GPT] ", key, " must be a finite number, a str or a bool, got ",
                                     std::string(py::repr(value)), " (", type_name(value), ")");
      if (e.matches(PyExc_TypeError)) throw WrongType(detail);
      throw Error(detail);
    }
    it->second = Json::parse(text);
  }
  try {
    nn::GPTConfig c = model_config_from_json(defaults, "GPT");
    c.seed = seed;
    return c;
  } catch (const ConfigError& e) {
    throw Error(cat("[GPT] ", e.detail()));
  }
}

void bind_module(py::module_& m) {
  py::class_<Module, std::shared_ptr<Module>>(m, "Module", "What every folio.nn module has: its parameters, by name.")
      .def(
          "parameters", [](const Module& self) { return self.parameters(); },
          "The parameters (Tensors that require grad, shared with the module), in named_parameters()'s order.")
      .def(
          "named_parameters",
          [](const Module& self) {
            py::dict out;
            for (const auto& [name, t] : self.named_parameters()) out[py::str(name)] = t;
            return out;
          },
          "{name: Tensor}: every parameter under its dotted name (\"heads.0.key.weight\"), depth-first.")
      .def("zero_grad", &Module::zero_grad, "Sets every parameter's gradient, if any, to zeros.")
      .def(
          "train",
          [](const py::object& self, bool on) {
            self.cast<Module&>().train(on);
            return self;
          },
          py::arg("mode") = true, "Switches dropout on (mode=True, the default of a new module) or off; returns the module.")
      .def(
          "eval",
          [](const py::object& self) {
            self.cast<Module&>().eval();
            return self;
          },
          "train(False): dropout off, as generation and evaluation run; returns the module.")
      .def_property_readonly("training", &Module::training, "Whether dropout is on.")
      .def_property_readonly("num_parameters", &Module::num_parameters, "The number of weights.");
}

void bind_linear(py::module_& m) {
  py::class_<nn::Linear, Module, std::shared_ptr<nn::Linear>>(m, "Linear", "x (..., in) -> x @ weight.T + bias (..., out).")
      .def(py::init([](int64_t in, int64_t out, bool bias, const py::object& seed) {
             require(in >= 1 && out >= 1, "[Linear]", cat("in_features ", in, " and out_features ", out, " must be >= 1"));
             Rng init(seed_argument(seed, "[Linear]"));
             return std::make_shared<nn::Linear>(in, out, bias, init);
           }),
           py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true, py::arg("seed") = 1337,
           "Args:\n    in_features, out_features: the sizes of x's last dimension and of the output's.\n"
           "    bias: whether it adds a bias (starting at zero).\n"
           "    seed: the draw of weight (out, in) ~ N(0, 0.02).")
      .def("__call__", &nn::Linear::forward, py::arg("x"), "x (..., in) -> (..., out)")
      .def_readonly("weight", &nn::Linear::weight, "(out, in)")
      .def_property_readonly(
          "bias", [](const nn::Linear& l) -> py::object { return l.bias.defined() ? py::cast(l.bias) : py::none(); },
          "(out), or None")
      .def("__repr__", [](const nn::Linear& l) {
        return cat("<folio.nn.Linear ", l.weight.size(1), " -> ", l.weight.size(0), l.bias.defined() ? ", bias" : ", no bias", ">");
      });
}

void bind_attention(py::module_& m) {
  py::class_<nn::Head, Module, std::shared_ptr<nn::Head>>(
      m, "Head",
      "One causal self-attention head, as the tutorials build it: k, q, v = key(x), query(x), value(x);\n"
      "weights = softmax of q @ k.T * head_size**-0.5 with the tril mask (-inf above the diagonal);\n"
      "dropout on the weights; weights @ v.")
      .def(py::init([](int64_t n_embd, int64_t head_size, int64_t block_size, float dropout, const py::object& seed) {
             require(n_embd >= 1 && head_size >= 1 && block_size >= 1, "[Head]",
                     cat("n_embd ", n_embd, ", head_size ", head_size, " and block_size ", block_size, " must be >= 1"));
             require(dropout >= 0 && dropout < 1, "[Head]", cat("dropout must be in [0, 1), got ", dropout));
             const uint64_t s = seed_argument(seed, "[Head]");
             Rng init(s);
             return std::make_shared<nn::Head>(n_embd, head_size, block_size, dropout, init, dropout_rng(s));
           }),
           py::arg("n_embd"), py::arg("head_size"), py::arg("block_size"), py::arg("dropout") = 0.0f,
           py::arg("seed") = 1337,
           "Args:\n    n_embd: x's channels (C).\n    head_size: the size of keys, queries and values.\n"
           "    block_size: the longest sequence (T) it takes.\n"
           "    dropout: the probability of dropping an attention weight in training.\n"
           "    seed: the draw of the weights (N(0, 0.02)) and of the dropout masks.")
      .def("__call__", &attend<nn::Head>, py::arg("x"), py::arg("return_weights") = false,
          "x (B, T, C) -> (B, T, head_size); with return_weights, (out, weights (B, T, T)): the\n"
          "attention weights after the softmax and before dropout (rows are queries).")
      .def_readonly("key", &nn::Head::key)
      .def_readonly("query", &nn::Head::query)
      .def_readonly("value", &nn::Head::value)
      .def_readonly("head_size", &nn::Head::head_size)
      .def("__repr__", [](const nn::Head& h) {
        return cat("<folio.nn.Head ", h.key->weight.size(1), " -> ", h.head_size, ", context ", h.block_size, ">");
      });

  py::class_<nn::MultiHead, Module, std::shared_ptr<nn::MultiHead>>(
      m, "MultiHead", "n_head Heads side by side, their outputs concatenated, then projected back to n_embd.")
      .def(py::init([](int64_t n_embd, int64_t n_head, int64_t head_size, int64_t block_size, float dropout, bool bias,
                       const py::object& seed) {
             require(n_embd >= 1 && n_head >= 1 && head_size >= 1 && block_size >= 1, "[MultiHead]",
                     cat("n_embd ", n_embd, ", n_head ", n_head, ", head_size ", head_size, " and block_size ",
                         block_size, " must be >= 1"));
             require(dropout >= 0 && dropout < 1, "[MultiHead]", cat("dropout must be in [0, 1), got ", dropout));
             const uint64_t s = seed_argument(seed, "[MultiHead]");
             Rng init(s);
             return std::make_shared<nn::MultiHead>(n_embd, n_head, head_size, block_size, dropout, bias, init,
                                                    dropout_rng(s));
           }),
           py::arg("n_embd"), py::arg("n_head"), py::arg("head_size"), py::arg("block_size"), py::arg("dropout") = 0.0f,
           py::arg("bias") = true, py::arg("seed") = 1337,
           "Args:\n    n_embd: x's channels (C).\n    n_head: the number of heads.\n"
           "    head_size: each head's size (n_head * head_size need not be C: proj maps it back).\n"
           "    block_size: the longest sequence (T) it takes.\n"
           "    dropout: on the attention weights and on the projection's output, in training.\n"
           "    bias: whether the projection has a bias.\n    seed: the draw of the weights and of the dropout masks.")
      .def("__call__", &attend<nn::MultiHead>, py::arg("x"), py::arg("return_weights") = false,
          "x (B, T, C) -> (B, T, C); with return_weights, (out, weights (B, n_head, T, T)).")
      .def_readonly("heads", &nn::MultiHead::heads)
      .def_readonly("proj", &nn::MultiHead::proj)
      .def("__repr__", [](const nn::MultiHead& mh) {
        return cat("<folio.nn.MultiHead ", mh.n_head, " heads of ", mh.head_size, ", ", mh.proj->weight.size(0),
                   " channels, context ", mh.block_size, ">");
      });
}

void bind_gpt(py::module_& m) {
  py::class_<nn::GPT, Module, std::shared_ptr<nn::GPT>>(
      m, "GPT",
      "folio's model, as folio train builds it: token and position embeddings, n_layer pre-LayerNorm\n"
      "blocks of MultiHead attention and a feed-forward, a final LayerNorm, a Linear onto the vocabulary.")
      .def(py::init([](const py::object& seed, const py::kwargs& options) {
             return std::make_shared<nn::GPT>(gpt_config(options, seed_argument(seed, "[GPT]")));
           }),
           py::kw_only(), py::arg("seed") = 1337,
           "Args:\n    seed: the draw of the weights (and of the dropout masks).\n"
           "    **options: a checkpoint config's fields by name, each defaulting to folio train's:\n"
           "        vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0,\n"
           "        bias=True, activation=\"relu\", and the model options (pos=\"rope\", qk_norm=True, ...).\n"
           "        An unknown name or a bad value raises ValueError naming it.")
      .def(
          "__call__",
          [](const nn::GPT& g, const py::handle& ids_obj, const py::handle& targets_obj) {
            const int64_t V = g.config().vocab_size;
            const Ids ids = ids_array(ids_obj, V, "[GPT] ids", 2);  // (B, T)
            const int64_t B = ids.shape[0], T = ids.shape[1];
            if (T > g.config().block_size)
              throw Error(cat("[GPT] ids has ", T, " tokens a row, more than block_size ", g.config().block_size));
            Ids targets;  // none: no loss
            if (!targets_obj.is_none()) {
              targets = ids_array(targets_obj, V, "[GPT] targets", 2);
              if (targets.shape != ids.shape)
                throw Error(cat("[GPT] targets must have ids' shape (", B, ", ", T, "), got (", targets.shape[0], ", ",
                                targets.shape[1], ")"));
            }
            nn::GPT::Output out;
            {
              py::gil_scoped_release nogil;  // a large model's forward pass takes a while
              out = g.forward(ids.values, B, T, targets.values);
            }
            return py::make_tuple(out.logits, targets.values.empty() ? py::none() : py::cast(out.loss));
          },
          py::arg("ids"), py::arg("targets") = py::none(),
          "ids (B, T) -> (logits (B, T, V), loss): loss is the mean cross-entropy against targets (B, T),\n"
          "a 0-d Tensor, or None without targets. ids and targets: integer arrays or nested lists, each\n"
          "id below vocab_size; T <= block_size. One module should not run in two threads at once\n"
          "while its dropout is on (they would share its mask generator).")
      .def_property_readonly(
          "config",
          [](const nn::GPT& g) { return config_dict(g.config()); },
          "The options as a dict, as a checkpoint saves them.")
      .def("__repr__", [](const nn::GPT& g) {
        const nn::GPTConfig& c = g.config();
        return cat("<folio.nn.GPT ", c.n_layer, " layers, ", c.n_head, " heads, ", c.n_embd, " channels, context ",
                   c.block_size, ", vocabulary ", c.vocab_size, ": ", g.num_parameters(), " parameters>");
      });
}

}  // namespace

void bind_nn(py::module_& m) {
  bind_module(m);
  bind_linear(m);
  bind_attention(m);
  bind_gpt(m);
}

}  // namespace folio::python
