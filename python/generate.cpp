// Model.generate and Model.stream: text after a prompt through infer::Generator, as
// folio generate writes it (same seed, same text). The GIL is released while tokens are
// computed; generate() asks for signals (Ctrl-C) every few tokens.
#include <pybind11/stl.h>

#include <cmath>

#include "data/chat_template.h"
#include "infer/generator.h"
#include "python/bindings.h"

namespace folio::python {
namespace {

// What one generation was asked for, checked as folio generate checks its flags.
struct Request {
  std::vector<int32_t> prompt;  // (T) token ids
  SampleOptions so;
  uint64_t seed = 0;
  std::vector<std::string> stops;
  std::optional<int32_t> end_token;  // a chat model's end of turn
};

Request request(const Loaded& l, const py::object& prompt, int64_t max_new_tokens, double temperature, int64_t top_k,
                double top_p, bool greedy, const py::object& seed, const py::object& stop) {
  Request r;
  SampleOptions& so = r.so;
  so.max_new_tokens = max_new_tokens, so.temperature = float(temperature), so.top_k = top_k, so.top_p = float(top_p);
  so.greedy = greedy;
  // 0 is the limit of sampling as it cools, as folio generate reads it; the rest is
  // checked as the library checks it, in the same names.
  if (so.temperature == 0.0f) so.greedy = true, so.temperature = 1.0f;
  so.validate();
  r.seed = seed_argument(seed, "[generate]");
  if (py::isinstance<py::str>(stop)) r.stops.push_back(text_argument(stop, "[generate] stop"));
  else if (!stop.is_none()) {
    // Any iterable of str (a list, a tuple); a number is no list of stops, nor are bytes,
    // whose items are ints.
    if (!py::isinstance<py::iterable>(stop) || py::isinstance<py::bytes>(stop))
      throw WrongType(cat("[generate] stop must be a str or a list of str, got ", type_name(stop)));
    for (const py::handle& one : stop) r.stops.push_back(text_argument(one, "[generate] each of stop"));
  }
  for (const std::string& one : r.stops)
    if (one.empty()) throw Error("[generate] a stop string is empty: it would end every sequence before it began");
  const Tokenizer& tok = *l.ck.tokenizer;
  // No prompt: a model trained on documents starts one after its end-of-text token, any
  // other after a newline, as folio generate does without --prompt.
  if (prompt.is_none() && tok.end_of_text()) r.prompt = {*tok.end_of_text()};
  else r.prompt = tok.encode(prompt.is_none() ? std::string("\n") : text_argument(prompt, "[generate] prompt"));
  if (r.prompt.empty()) throw Error("[generate] the prompt is empty");
  return r;
}

// A generation under way, one piece of text at a time (Model.stream's iterator).
struct Stream {
  LoadedPtr loaded;
  Request req;
  Rng rng;
  std::unique_ptr<infer::Generator> gen;
  int64_t produced = 0;
  bool done = false;
  // The next non-empty piece of text, or "" at the end.
  std::string next() {
    std::string piece;
    std::lock_guard lock(loaded->busy);
    while (piece.empty() && !done) {
      if (produced < req.so.max_new_tokens) {
        infer::Generator::Token t = gen->next();
        ++produced;
        piece += t.text;
        done = t.stopped;
      } else {
        piece += gen->finish().text;
        done = true;
      }
    }
    return piece;
  }
};

std::shared_ptr<Stream> start(const LoadedPtr& l, Request req) {
  auto s = std::make_shared<Stream>();
  s->loaded = l;
  s->req = std::move(req);
  s->rng = Rng(s->req.seed);
  s->gen = std::make_unique<infer::Generator>(*l->ck.model, 1, s->req.so.kv_cache);
  s->gen->start(0, s->req.prompt, s->req.so, s->rng, l->ck.tokenizer.get(), s->req.stops, s->req.end_token);
  return s;
}

std::string generate(const LoadedPtr& l, Request req) {
  py::gil_scoped_release nogil;
  const std::shared_ptr<Stream> s = start(l, std::move(req));
  std::string text;
  for (int64_t pieces = 1;; ++pieces) {
    const std::string piece = s->next();
    if (piece.empty()) break;
    text += piece;
    // Ctrl-C reaches Python between tokens: a signal is only seen with the GIL held.
    if (pieces % 16 == 0) check_signals();
  }
  return text;
}

// Model.chat's prompt: the messages through the model's template (data/chat_template.h).
void chat_request(const Loaded& l, const py::object& messages, Request& r) {
  std::vector<ChatMessage> m;
  // One message, or a text, iterates as its keys or characters: named for what it is.
  if (py::isinstance<py::dict>(messages) || py::isinstance<py::str>(messages) || !py::isinstance<py::iterable>(messages))
    throw WrongType(cat("[chat] messages must be a list of {\"role\": ..., \"content\": ...} dicts, got ",
                        type_name(messages)));
  for (const py::handle& one : messages) {
    if (!py::isinstance<py::dict>(one)) throw Error("[chat] each message must be a dict {\"role\": ..., \"content\": ...}");
    const py::dict d = py::reinterpret_borrow<py::dict>(one);
    if (!d.contains("role") || !d.contains("content")) throw Error("[chat] each message needs a role and a content");
    m.push_back({text_argument(d["role"], "[chat] role"), text_argument(d["content"], "[chat] content")});
  }
  if (m.empty()) throw Error("[chat] messages is empty");
  ChatPrompt p = chat_prompt_for(*l.ck.tokenizer, m);
  // Refused, not cut from the front: the rule folio chat and /v1/chat/completions apply.
  const int64_t block_size = l.ck.model->config().block_size;
  if (const std::optional<std::string> why = chat_context_overflow(int64_t(p.ids.size()), block_size))
    throw Error(cat("[chat] ", *why));
  r.prompt = std::move(p.ids), r.end_token = p.end_token, r.stops = std::move(p.stops);
}

constexpr const char* kArgs =
    "Args:\n"
    "    prompt: the text to continue (a str). None: a newline, or for a model trained on\n"
    "        documents (a token directory) its end-of-text token, as folio generate without --prompt.\n"
    "    max_new_tokens: how many tokens to sample (>= 0).\n"
    "    temperature: the softmax temperature (>= 0; 0: the most likely token every time).\n"
    "    top_k: sample from the k most likely tokens (0: all).\n"
    "    top_p: nucleus sampling mass in (0, 1].\n"
    "    greedy: always the most likely token (no sampling).\n"
    "    seed: the sampling seed, an int in [0, 2**64); the same seed gives folio generate --seed's text.\n"
    "    stop: a str or a list of str: the text ends before the first of them that appears.\n";

}  // namespace

void bind_generate(py::class_<Loaded, LoadedPtr>& model) {
  py::class_<Stream, std::shared_ptr<Stream>>(model, "Stream", "Text as it is generated: iterate for its pieces.")
      .def("__iter__", [](const std::shared_ptr<Stream>& s) { return s; })
      .def("__next__", [](Stream& s) {
        std::string piece;
        {
          py::gil_scoped_release nogil;
          piece = s.next();
        }
        if (piece.empty()) throw py::stop_iteration();
        return utf8_text(piece);
      });
  const auto args = [] {
    return std::make_tuple(py::arg("prompt") = py::none(), py::arg("max_new_tokens") = 500, py::arg("temperature") = 0.8,
                           py::arg("top_k") = 0, py::arg("top_p") = 1.0, py::arg("greedy") = false,
                           py::arg("seed") = 1337, py::arg("stop") = py::none());
  };
  const auto [a0, a1, a2, a3, a4, a5, a6, a7] = args();
  model.def(
      "generate",
      [](const LoadedPtr& l, const py::object& prompt, int64_t n, double temperature, int64_t top_k, double top_p,
         bool greedy, const py::object& seed, const py::object& stop) {
        return utf8_text(generate(l, request(*l, prompt, n, temperature, top_k, top_p, greedy, seed, stop)));
      },
      a0, a1, a2, a3, a4, a5, a6, a7,
      cat("Samples text after a prompt, as folio generate does; the GIL is released meanwhile.\n\n", kArgs,
          "\nReturns:\n    str: the continuation alone (folio generate prints the prompt, the continuation and a "
          "newline).")
          .c_str());
  model.def(
      "stream",
      [](const LoadedPtr& l, const py::object& prompt, int64_t n, double temperature, int64_t top_k, double top_p,
         bool greedy, const py::object& seed, const py::object& stop) {
        Request req = request(*l, prompt, n, temperature, top_k, top_p, greedy, seed, stop);
        py::gil_scoped_release nogil;
        return start(l, std::move(req));
      },
      a0, a1, a2, a3, a4, a5, a6, a7,
      cat("Samples text as generate() does, handing it out as it decodes.\n\n", kArgs,
          "\nReturns:\n    Model.Stream: an iterator of str pieces (whole characters), which joined are "
          "generate()'s text.")
          .c_str());
  model.def(
      "chat",
      [](const LoadedPtr& l, const py::object& messages, int64_t n, double temperature, int64_t top_k, double top_p,
         bool greedy, const py::object& seed) {
        Request req = request(*l, py::str("\n"), n, temperature, top_k, top_p, greedy, seed, py::none());
        chat_request(*l, messages, req);
        return utf8_text(generate(l, std::move(req)));
      },
      py::arg("messages"), py::arg("max_new_tokens") = 256, a2, a3, a4, a5, a6,
      "The assistant's reply to a conversation, through the model's own template: ChatML for a chat model\n"
      "(fine-tuned on conversations), ending at <|im_end|>; the plain \"User:\"/\"Assistant:\" text for a\n"
      "base model, ending at a blank line (docs/chat.md). /v1/chat/completions and folio chat render the same\n"
      "tokens.\n\nArgs:\n    messages: a list of {\"role\": \"system\"|\"user\"|\"assistant\", \"content\": str}\n"
      "        (\"developer\", as OpenAI's newer clients send, is a system message).\n"
      "    max_new_tokens, temperature, top_k, top_p, greedy, seed: as in generate().\n\n"
      "Returns:\n    str: the reply.\n\n"
      "Raises:\n    ValueError: a conversation whose prompt (the template included) leaves no room for the\n"
      "        reply's first token in the model's context (block_size), as /v1/chat/completions refuses it\n"
      "        (context_length_exceeded): it is not cut from the front, which would lose the system message.");
}

}  // namespace folio::python
