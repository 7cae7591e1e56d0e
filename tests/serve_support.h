#pragma once
// What the in-process tests of folio serve share (tests/test_serve*.cpp): a tiny model
// and tokenizer, jobs run to their end, the server on an ephemeral port, raw sockets,
// and checks of OpenAI's error object and of Server-Sent Events.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "serve/server.h"
#include "support.h"

namespace folio::serve_test {

using json = nlohmann::json;
using serve::ApiError;

// Its characters include the chat template's speaker labels ("System:", "User:", "Assistant:").
inline const std::string kText = "abcdefgh ijklmnop\nqrstuvwxyz ABCDEFG.,;!?'\xC3\xA9 SU:";

inline std::shared_ptr<const Tokenizer> tokenizer() {
  static const std::shared_ptr<const Tokenizer> t = make_tokenizer({}, kText);
  return t;
}

// {status, param, fragment of the message}
struct BadRequest {
  std::string body;
  int status;
  std::string param, fragment;
};

// OpenAI's error object: a message, a type, a param and a code, where the code is one
// of OpenAI's strings (model_not_found) or null, never the HTTP status as a number,
// which OpenAI's clients type as a string.
inline void expect_openai_error(const json& j) {
  ASSERT_TRUE(j.contains("error")) << j;
  const json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string()) << e;
  EXPECT_TRUE(e["type"].is_string()) << e;
  EXPECT_TRUE(e.contains("param") && (e["param"].is_null() || e["param"].is_string())) << e;
  EXPECT_TRUE(e.contains("code") && (e["code"].is_null() || e["code"].is_string())) << e;
}

// Each case's body is refused by `parse` with its status, param and message, in
// OpenAI's error object.
template <class Parse>
void expect_refused(const std::vector<BadRequest>& cases, Parse parse) {
  for (const BadRequest& c : cases) {
    try {
      parse(c.body);
      ADD_FAILURE() << "accepted " << c.body;
    } catch (const serve::ApiError& e) {
      EXPECT_EQ(e.status, c.status) << c.body;
      EXPECT_EQ(e.param, c.param) << c.body << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.fragment), std::string::npos) << c.body << ": " << e.what();
      const nlohmann::json j = nlohmann::json::parse(serve::error_json(e));
      expect_openai_error(j);
      if (c.status == 400) {
        EXPECT_EQ(j["error"]["type"], "invalid_request_error") << c.body;
      }
    }
  }
}

// block_size 16 by default; a chat test takes more, as a conversation through the plain
// template ("User:\n...\n\nAssistant:\n") must fit the context with room for the reply.
inline ModelCheckpoint small_model(nn::Positions pos = nn::Positions::learned, int64_t block_size = 16) {
  nn::GPTConfig c{.vocab_size = tokenizer()->vocab_size(), .block_size = block_size, .n_layer = 2, .n_head = 2,
                  .n_embd = 16};
  c.pos = pos;
  ModelCheckpoint ck{std::make_unique<nn::GPT>(c), tokenizer(), 3, "test"};
  ck.model->eval();
  return ck;
}

inline serve::CompletionRequest request(const std::string& prompt, int64_t tokens, uint64_t seed) {
  serve::CompletionRequest r;
  r.prompt = tokenizer()->encode(prompt);
  r.sample.max_new_tokens = tokens;
  r.sample.temperature = 1.0f;
  r.has_seed = true;
  r.seed = seed;
  return r;
}

inline std::string finish(serve::Job& job, std::string* reason = nullptr) {
  std::string text;
  for (;;) {
    auto u = job.wait(std::chrono::milliseconds(100));
    text += u.text;
    if (u.done) {
      if (reason) *reason = u.finish_reason;
      return text;
    }
  }
}

// The routes, in process, on an ephemeral port.
// A raw connection to the server on this machine.
inline int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ADD_FAILURE() << "connect";
  return fd;
}

class ServeRoutes : public ::testing::Test {
 protected:
  void start(serve::ServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    o.model_name = "tiny";
    server = std::make_unique<serve::Server>(ck, o);
    port = server->bind();
    thread = std::thread([this] { server->listen(); });
  }
  void TearDown() override {
    if (server) server->stop();
    if (thread.joinable()) thread.join();
  }
  httplib::Client client() {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(20, 0);
    return c;
  }
  json health() {
    auto r = client().Get("/health");
    return r ? json::parse(r->body) : json();
  }
  // Takes a slot and keeps it: a streamed request for a million tokens on a raw
  // connection, returned once /health shows a slot busy; closing it ends the request.
  // (A thousand tokens took milliseconds: the slot could be free again before a test
  // saw it busy, and the test waited for ever.)
  int hold_a_slot(const std::string& api_key = "") {
    const std::string body = R"({"prompt": "abc", "max_tokens": 1000000, "stream": true})";
    const int fd = connect_to(port);
    const std::string request =
        cat("POST /v1/completions HTTP/1.1\r\nHost: x\r\n",
            api_key.empty() ? "" : cat("Authorization: Bearer ", api_key, "\r\n"),
            "Content-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
    EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
    const auto t0 = std::chrono::steady_clock::now();
    while (health()["slots_processing"] < 1) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) {
        ADD_FAILURE() << "the request never took a slot";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return fd;
  }
  ModelCheckpoint ck = small_model();
  std::unique_ptr<serve::Server> server;
  std::thread thread;
  int port = 0;
};

inline void expect_error_object(const httplib::Result& r, int status, const std::string& fragment) {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, status) << r->body;
  const json j = json::parse(r->body);
  expect_openai_error(j);
  EXPECT_NE(j["error"]["message"].get<std::string>().find(fragment), std::string::npos) << r->body;
}

// Server-Sent Events -> the JSON of each data: line ("[DONE]" kept as a string).
inline std::vector<json> sse_events(const std::string& body) {
  std::vector<json> events;
  for (size_t at = 0; at < body.size();) {
    const size_t end = body.find("\n\n", at);
    if (end == std::string::npos) break;
    const std::string event = body.substr(at, end - at);
    at = end + 2;
    if (event.rfind("data: ", 0) != 0) continue;
    const std::string data = event.substr(6);
    events.push_back(data == "[DONE]" ? json(data) : json::parse(data));
  }
  return events;
}

}  // namespace folio::serve_test
