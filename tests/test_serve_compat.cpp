// folio serve as OpenAI clients and operators expect it: one listener per port, the
// model's name checked, 405 with Allow, /v1/models' created, an honest /health, the
// favicon without a key, and the access log.
#include <algorithm>
#include <fstream>

#include "serve/access_log.h"
#include "serve/model_card.h"
#include "serve_support.h"
#include "train/run_state.h"

namespace folio {
namespace {

using namespace serve_test;

// httplib's default socket options (SO_REUSEPORT) let a second server bind a busy
// port and take half its connections, past the first one's API key.
TEST_F(ServeRoutes, ASecondServerOnItsPortIsRefused) {
  serve::ServerOptions o;
  o.api_key = "s3cret";
  start(o);
  serve::ServerOptions again;
  again.port = port;
  again.model_name = "other";
  serve::Server second(ck, again);
  try {
    second.bind();
    ADD_FAILURE() << "a second server bound port " << port;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("port in use"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(cat("--port ", port)), std::string::npos) << e.what();
  }
  // Every call without the key still meets the first server.
  for (int i = 0; i < 6; ++i) {
    auto r = client().Get("/v1/models");
    ASSERT_TRUE(r) << "call " << i << " met the second listener, which never answers";
    EXPECT_EQ(r->status, 401);
  }
}

TEST_F(ServeRoutes, AnotherMethodOnARouteIs405WithAllow) {
  start({});
  auto c = client();
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/v1/attention"}) {
    auto r = c.Get(path);
    expect_error_object(r, 405, cat(path, " takes POST, not GET"));
    EXPECT_EQ(r->get_header_value("Allow"), "POST");
  }
  auto r = c.Post("/v1/models", "{}", "application/json");
  expect_error_object(r, 405, "takes GET, HEAD, not POST");
  EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD");
  expect_error_object(c.Get("/v1/nowhere"), 404, "no route GET /v1/nowhere");
}

TEST_F(ServeRoutes, AnUnknownModelIs404ModelNotFound) {
  ck = small_model(nn::Positions::learned, 48);  // room for a chat's template and reply
  start({});
  auto c = client();
  for (const char* route : {"/v1/completions", "/v1/chat/completions"}) {
    const bool chat = std::string(route) == "/v1/chat/completions";
    auto body = [&](const char* model) {
      json j = {{"max_tokens", 2}};
      if (chat) j["messages"] = {{{"role", "user"}, {"content", "ab"}}};
      else j["prompt"] = "ab";
      if (model) j["model"] = model;
      return j.dump();
    };
    auto r = c.Post(route, body("gpt-4"), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << r->body;
    const json e = json::parse(r->body)["error"];
    EXPECT_EQ(e["code"], "model_not_found") << e;
    EXPECT_EQ(e["param"], "model") << e;
    EXPECT_NE(e["message"].get<std::string>().find("'gpt-4'"), std::string::npos) << e;
    EXPECT_EQ(c.Post(route, body("tiny"), "application/json")->status, 200) << route;
    EXPECT_EQ(c.Post(route, body(nullptr), "application/json")->status, 200) << route;  // no "model": served
  }
  expect_error_object(c.Post("/v1/completions", R"({"prompt": "ab", "model": 3})", "application/json"), 400,
                      "model must be a string");
}

// OpenAI's error object carries a code that is one of its strings or null, as its
// clients type it; folio put the HTTP status there as a number, which the status line
// already says.
TEST_F(ServeRoutes, ErrorCodesAreOpenAIsStringsOrNull) {
  serve::ServerOptions o;
  o.api_key = "s3cret";
  start(o);
  auto c = client();
  const httplib::Headers wrong = {{"Authorization", "Bearer nope"}}, auth = {{"Authorization", "Bearer s3cret"}};
  // {response, status, code ("": null)}
  const std::vector<std::tuple<httplib::Result, int, std::string>> cases = [&] {
    std::vector<std::tuple<httplib::Result, int, std::string>> v;
    v.emplace_back(c.Get("/v1/models"), 401, "");
    v.emplace_back(c.Get("/v1/models", wrong), 401, "invalid_api_key");
    v.emplace_back(c.Post("/v1/completions", auth, "{", "application/json"), 400, "");
    v.emplace_back(c.Get("/v1/nowhere", auth), 404, "");
    v.emplace_back(c.Post("/v1/completions", auth, R"({"prompt": "ab", "model": "gpt-4"})", "application/json"), 404,
                   "model_not_found");
    return v;
  }();
  for (const auto& [r, status, code] : cases) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    const json j = json::parse(r->body);
    expect_openai_error(j);
    EXPECT_EQ(j["error"]["code"], code.empty() ? json(nullptr) : json(code)) << r->body;
  }
}

TEST_F(ServeRoutes, AnyModelNameServesWhateverARequestNames) {
  serve::ServerOptions o;
  o.any_model_name = true;
  start(o);
  auto r = client().Post("/v1/completions", R"({"prompt": "ab", "max_tokens": 2, "model": "gpt-4"})",
                         "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["model"], "tiny");  // the response names what answered
}

TEST_F(ServeRoutes, ModelsSaysWhenTheModelWasMadeAndItsPrompt) {
  serve::ServerOptions o;
  o.created = 1700000000;
  o.default_prompt = "First Citizen:\n";
  start(o);
  const json m = json::parse(client().Get("/v1/models")->body)["data"][0];
  EXPECT_EQ(m["created"], 1700000000);
  EXPECT_EQ(m["meta"]["prompt"], "First Citizen:\n");
}

// The /health request's own connection was counted as waiting for its request.
TEST_F(ServeRoutes, HealthOnAnIdleServerCountsNoConnectionWaiting) {
  start({});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(health()["connections_waiting"], 0) << i;
}

TEST_F(ServeRoutes, TheFaviconNeedsNoKey) {
  serve::ServerOptions o;
  o.api_key = "s3cret";
  start(o);
  auto r = client().Get("/favicon.ico");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "image/svg+xml");
  EXPECT_EQ(r->body.rfind("<svg", 0), 0u);
  EXPECT_NE(client().Get("/")->body.find("rel=\"icon\""), std::string::npos);  // the page names it inline
}

TEST_F(ServeRoutes, TheAccessLogHasALinePerRequest) {
  auto lines = std::make_shared<std::vector<std::string>>();
  auto mutex = std::make_shared<std::mutex>();
  serve::ServerOptions o;
  o.access_log = [lines, mutex](const std::string& line) {
    std::lock_guard lock(*mutex);
    lines->push_back(line);
  };
  start(o);
  auto c = client();
  c.Get("/health");
  c.Post("/v1/completions", R"({"prompt": "ab", "max_tokens": 5})", "application/json");
  c.Post("/v1/completions", R"({"prompt": "ab", "max_tokens": 4, "stream": true})", "application/json");
  c.Get("/v1/completions");
  c.Get("/a%0Ab");
  // A line is written after the response's last byte: the client may have it first.
  const auto count = [&] {
    std::lock_guard lock(*mutex);
    return lines->size();
  };
  for (int i = 0; i < 200 && count() < 5; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::lock_guard lock(*mutex);
  ASSERT_EQ(lines->size(), 5u);
  const std::vector<std::string> start_of = {"GET /health 200 tokens=- ms=", "POST /v1/completions 200 tokens=5 ms=",
                                             "POST /v1/completions 200 tokens=4 ms=",
                                             "GET /v1/completions 405 tokens=- ms=", "GET /a%0Ab 404 tokens=- ms="};
  // In any order: a streamed response's line may come after the next request's.
  std::vector<std::string> unmatched = *lines;
  for (const std::string& start : start_of) {
    const auto it = std::find_if(unmatched.begin(), unmatched.end(),
                                 [&](const std::string& line) { return line.rfind(start, 0) == 0; });
    if (it == unmatched.end()) {
      ADD_FAILURE() << "no line starts with " << start;
    } else {
      unmatched.erase(it);
    }
  }
}

TEST(ServeAccessLog, ALineIsOneLineWhateverThePath) {
  EXPECT_EQ(serve::access_line("GET", "/a b\n\x01\xff%", 200, -1, 1.25), "GET /a%20b%0A%01%FF%25 200 tokens=- ms=1.2");
  EXPECT_EQ(serve::access_line("POST", "/v1/completions", 200, 7, -1), "POST /v1/completions 200 tokens=7 ms=-");
  EXPECT_EQ(serve::access_line("GET", std::string(500, 'a'), 404, -1, 0),
            "GET " + std::string(200, 'a') + "... 404 tokens=- ms=0.0");
}

}  // namespace
}  // namespace folio

namespace folio {
namespace {

using namespace serve_test;
using namespace folio::testing;

// The name and the page's prompt, from where the checkpoint lies.
TEST(ServeModelCard, TheRunsNameAndTheFirstLineOfItsText) {
  TempDir dir("serve_model_card");
  const ModelCheckpoint ck = small_model();
  fs::create_directories(dir.path / "runs" / "x");
  const std::string weights = dir / "runs/x/best.safetensors";
  save_model(weights, *ck.model, *tokenizer(), 3);
  std::ofstream(dir / "text.txt") << "abc def\r\nghi\n";
  TrainState state;
  state.config.data = dir / "text.txt";
  save_state(dir / "runs/x/state.safetensors", state);
  const ModelCheckpoint loaded = load_model(weights);
  for (const std::string& path : {dir / "runs/x", dir / "runs/x/", weights}) {
    const serve::ModelCard card = serve::model_card(path, loaded);
    EXPECT_EQ(card.name, "x") << path;
    EXPECT_EQ(card.prompt, "abc def\n") << path;
    EXPECT_GT(card.created, 1600000000) << path;
  }
  // The text is gone (or holds characters the model cannot read): a newline.
  fs::remove(dir / "text.txt");
  EXPECT_EQ(serve::model_card(weights, loaded).prompt, "\n");
  std::ofstream(dir / "text.txt") << "\xE2\x82\xAC uro\n";
  EXPECT_EQ(serve::model_card(weights, loaded).prompt, "\n");
  // A checkpoint outside any run: its file's stem.
  const std::string bare = dir / "mine.safetensors";
  save_model(bare, *ck.model, *tokenizer(), 3);
  const serve::ModelCard card = serve::model_card(bare, load_model(bare));
  EXPECT_EQ(card.name, "mine");
  EXPECT_EQ(card.prompt, "\n");
}

// Slots or queue places the machine cannot hold, and an empty --host, are refused at
// start (exit 2, naming the option), not an abort when the threads run out, the OOM
// killer after the banner, or a listener elsewhere than the banner says. The address
// space is capped (ulimit -v) so that running out comes early and costs nothing outside
// the test: each thread reserves its stack, each slot its state.
TEST(ServeStart, OptionsItCannotHonourAreExitTwoAtStart) {
  if (built_with_asan()) GTEST_SKIP() << "ASan reserves more address space than the cap";
  TempDir dir("serve_start");
  const ModelCheckpoint ck = small_model();
  save_model(dir / "m.safetensors", *ck.model, *tokenizer(), 3);
  const auto serve = [&](const std::string& options, long address_kib) {
    const std::string err = dir / "err.txt";
    const std::string command = cat("ulimit -s 8192 && ulimit -v ", address_kib, " && exec timeout 60 ", FOLIO_BINARY,
                                    " serve --checkpoint ", dir / "m.safetensors", " --port 0 --quiet --threads 1 ",
                                    options, " >/dev/null 2>", err);
    const int status = std::system(command.c_str());
    return std::pair{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(err)};
  };
  const auto [slots, slots_err] = serve("--slots 1000000000", 2000000);  // their caches: terabytes
  EXPECT_EQ(slots, 2) << slots_err;
  expect_contains(slots_err, {"--slots 1000000000: each slot's KV cache takes", "GiB of memory: at most"});
  const auto [queue, queue_err] = serve("--queue 1000", 1000000);  // 1,036 threads of 8 MiB stacks
  EXPECT_EQ(queue, 2) << queue_err;
  expect_contains(queue_err, {"cannot start 1036 threads to run requests", "a shorter --queue"});
  const auto [alone, alone_err] = serve("--slots 1000 --no-batching --queue 0", 1000000);
  EXPECT_EQ(alone, 2) << alone_err;
  expect_contains(alone_err, {"cannot start 1000 decoding threads", "fewer --slots"});
  // An empty --host (an unset variable) is no address: httplib listened on ::1 while the
  // banner said http://:PORT/.
  const auto [host, host_err] = serve("--host ''", 4000000);
  EXPECT_EQ(host, 2) << host_err;
  expect_contains(host_err, {"--host is empty"});
}

}  // namespace
}  // namespace folio
