// folio serve's completions (plain and chat, whole or streamed) and /v1/attention:
// the routes that run the model.
#include <cmath>
#include <ctime>

#include "base/error.h"
#include "data/attention_prompt.h"
#include "serve/chat.h"
#include "serve/routes.h"

namespace folio::serve {

using std::chrono::milliseconds;

void Server::Routes::completions(const httplib::Request& req, httplib::Response& res, bool chat) {
  auto flying = flight();
  std::shared_ptr<Job> job;
  bool streaming = false;
  try {
    if (stopping) throw ApiError(503, "the server is stopping");
    CompletionRequest r = chat ? parse_chat_completion(req.body, *model.tokenizer, options.limits,
                                                       model.model->config().block_size)
                               : parse_completion(req.body, *model.tokenizer, options.limits);
    check_model(r.model);
    streaming = r.stream;
    job = scheduler.submit(std::move(r));
    if (!job) throw ApiError(503, cat("all ", options.scheduler.slots, " slots are busy and ", options.scheduler.queue,
                                      " requests wait already: retry later"));
  } catch (const ApiError& e) {
    return reply_error(res, e);
  }
  if (streaming) return stream(job, res, std::move(flying), chat);
  // Wait for a slot here, where a failure can still be answered with a 503.
  auto text = std::make_shared<std::string>();
  for (;;) {
    const Job::Update u = job->wait(milliseconds(100));
    *text += u.text;
    if (u.done && u.finish_reason == "error") return reply_error(res, ApiError(503, u.error));
    if (u.done || job->started()) break;
  }
  const std::string id = cat(chat ? "chatcmpl-" : "cmpl-", next_id++), model_name = options.model_name;
  res.set_chunked_content_provider(
      "application/json",
      [job, text, id, model_name, flying, chat](size_t, httplib::DataSink& sink) {
        const Job::Update u = job->wait(milliseconds(500), false);
        *text += u.text;
        AccessLog::tokens(job->completion_tokens());  // so far: a client that hangs up logs what it got
        if (!u.done) {
          // A space, which JSON ignores before a value, every half second of decoding:
          // a client that has gone makes the write fail, and the slot is freed.
          if (sink.write(" ", 1)) return true;
          job->cancel();
          return false;
        }
        const Usage usage{job->prompt_tokens(), job->completion_tokens()};
        const std::string body =
            u.finish_reason == "error" ? error_json(ApiError(500, u.error))
            : chat ? chat_completion_json(id, std::time(nullptr), model_name, *text, u.finish_reason, usage)
                   : completion_json(id, std::time(nullptr), model_name, *text, u.finish_reason, usage);
        if (!sink.write(body.data(), body.size())) return false;
        sink.done();
        return true;
      },
      [job](bool success) {
        if (!success) job->cancel();
      });
}

void Server::Routes::stream(std::shared_ptr<Job> job, httplib::Response& res, std::shared_ptr<void> flying,
                            bool chat) {
  const std::string id = cat(chat ? "chatcmpl-" : "cmpl-", next_id++), model_name = options.model_name;
  const int64_t created = std::time(nullptr);
  // A chat stream opens with the assistant's role, as OpenAI's does.
  auto first = std::make_shared<bool>(chat);
  auto chunk = [id, model_name, created, chat, first](const std::string& text, const std::string& finish,
                                                       const Usage* usage) {
    if (!chat) return completion_chunk(id, created, model_name, text, finish, usage);
    const bool opening = std::exchange(*first, false);
    return chat_chunk(id, created, model_name, text, opening, finish, usage);
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, chunk, flying](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& data) {
          const std::string event = "data: " + data + "\n\n";
          if (sink.write(event.data(), event.size())) return true;
          job->cancel();  // the client has gone: free the slot
          return false;
        };
        const Job::Update u = job->wait(milliseconds(1000));
        AccessLog::tokens(job->completion_tokens());  // so far: a client that hangs up logs what it got
        if (u.text.empty() && !u.done) {
          // Nothing for a second (queued, or a slow step): an SSE comment, which
          // clients skip, finds out whether the client is still there.
          const std::string ping = ": waiting\n\n";
          if (sink.write(ping.data(), ping.size())) return true;
          job->cancel();
          return false;
        }
        if (!u.text.empty() && !send(chunk(u.text, "", nullptr))) return false;
        if (!u.done) return true;
        if (u.finish_reason == "error") {
          if (!send(error_json(ApiError(503, u.error)))) return false;
        } else {
          const Usage usage{job->prompt_tokens(), job->completion_tokens()};
          if (!send(chunk("", u.finish_reason, &usage))) return false;
        }
        if (!send("[DONE]")) return false;
        sink.done();
        return true;
      },
      [job](bool success) {
        if (!success) job->cancel();
      });
}

void Server::Routes::attention(const httplib::Request& req, httplib::Response& res) {
  const nn::GPTConfig& c = model.model->config();
  std::vector<int32_t> ids;
  try {
    ids = parse_attention(req.body, *model.tokenizer, c.block_size);
  } catch (const ApiError& e) {
    return reply_error(res, e);
  }
  const int64_t T = int64_t(ids.size());
  std::vector<Tensor> weights;  // per layer (1, n_head, T, T), as folio attention reads them
  {
    std::lock_guard lock(model_mutex);
    NoGradGuard no_grad;
    model.model->forward(ids, 1, T, {}, &weights);
  }
  json tokens = json::array();
  // The BOS (a llama-family GGUF's) as <bos>, as folio attention labels it, not its empty text.
  for (int32_t id : ids) tokens.push_back({{"id", id}, {"text", attention_label(*model.tokenizer, id)}});
  // [layer][head][query][key], each query's row up to itself (the rest is masked to 0).
  json layers = json::array();
  for (int64_t l = 0; l < c.n_layer; ++l) {
    json heads = json::array();
    for (int64_t h = 0; h < c.n_head; ++h) {
      const float* w = weights[size_t(l)].data() + h * T * T;  // (T, T)
      json rows = json::array();
      for (int64_t q = 0; q < T; ++q) {
        json row = json::array();
        for (int64_t k = 0; k <= q; ++k) row.push_back(std::round(double(w[q * T + k]) * 1e5) / 1e5);
        rows.push_back(std::move(row));
      }
      heads.push_back(std::move(rows));
    }
    layers.push_back(std::move(heads));
  }
  reply(res, 200,
        dump({{"model", options.model_name},
              {"n_layer", c.n_layer},
              {"n_head", c.n_head},
              {"tokens", tokens},
              {"attention", layers}}));
}

}  // namespace folio::serve
