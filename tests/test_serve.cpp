// folio serve (serve/): stop strings, key comparison, request validation, the slots
// (batched against a thread per slot), and the HTTP routes in process, with
// httplib's own client and raw sockets for the clients that misbehave.
// Chat: tests/test_serve_chat.cpp; the gate before the threads: tests/test_serve_gate.cpp.
#include <cmath>

#include "infer/stop_filter.h"
#include "serve/chat.h"
#include "bytes_tokenizer.h"
#include "serve_support.h"

namespace folio {
namespace {

using namespace serve_test;

TEST(StopFilter, HoldsBackWhatMayStartAStopAndCutsAtIt) {
  infer::StopFilter f({"lo W"});
  std::string out = f.push("Hel");
  EXPECT_EQ(out, "He");  // "l" may begin "lo W"
  out += f.push("lo");
  out += f.push(" World");
  EXPECT_TRUE(f.matched());
  EXPECT_EQ(out, "Hel");
  EXPECT_EQ(f.push("more"), "");
}

TEST(StopFilter, MultibyteStopsAndTheEnd) {
  infer::StopFilter f({"\xC3\xA9!", "zz"});  // "é!"
  std::string out;
  for (const char* piece : {"caf", "\xC3\xA9", "?", "\xC3\xA9"}) out += f.push(piece);
  EXPECT_FALSE(f.matched());
  EXPECT_EQ(out, "caf\xC3\xA9?");  // the last é is held: it may begin "é!"
  EXPECT_EQ(f.flush(), "\xC3\xA9");
  infer::StopFilter none({});
  EXPECT_EQ(none.push("abc"), "abc");
}

TEST(SameKey, EqualOnlyWhenEqual) {
  EXPECT_TRUE(serve::same_key("secret", "secret"));
  EXPECT_FALSE(serve::same_key("secret", "secreT"));
  EXPECT_FALSE(serve::same_key("secret", "secret2"));
  EXPECT_FALSE(serve::same_key("", "x"));
  EXPECT_FALSE(serve::same_key("secret", ""));
}


TEST(ParseCompletion, RefusesBadFieldsWithTheirNames) {
  const serve::ApiLimits limits{.max_tokens = 100, .max_prompt_tokens = 50};
  const std::vector<BadRequest> cases = {
      {"{", 400, "", "not valid JSON"},
      {"[1]", 400, "", "must be a JSON object"},
      {"{\"prompt\": \"ab\xff\"}", 400, "", "UTF-8"},
      {"{\"prompt\": \"\\udc80\"}", 400, "", "surrogate"},
      {"{}", 400, "prompt", "is required"},
      {"{\"prompt\": 3}", 400, "prompt", "must be a string"},
      {"{\"prompt\": \"\"}", 400, "prompt", "is empty"},
      {"{\"prompt\": \"" + std::string(60, 'a') + "\"}", 400, "prompt", "limit of 50"},
      {"{\"prompt\": \"" + std::string(1000, 'a') + "\"}", 400, "prompt", "bytes"},
      {"{\"prompt\": \"a\\u0001\"}", 400, "prompt", "cannot be encoded"},
      {"{\"prompt\": \"a\", \"max_tokens\": 1000000000}", 400, "max_tokens", "[1, 100]"},
      {"{\"prompt\": \"a\", \"max_tokens\": 0}", 400, "max_tokens", "[1, 100]"},
      {"{\"prompt\": \"a\", \"max_tokens\": 1.5}", 400, "max_tokens", "integer"},
      {"{\"prompt\": \"a\", \"max_tokens\": \"5\"}", 400, "max_tokens", "integer"},
      {"{\"prompt\": \"a\", \"temperature\": -1}", 400, "temperature", "[0, 2]"},
      {"{\"prompt\": \"a\", \"temperature\": 1e300}", 400, "temperature", "[0, 2]"},
      {"{\"prompt\": \"a\", \"temperature\": NaN}", 400, "", "not valid JSON"},
      {"{\"prompt\": \"a\", \"temperature\": \"hot\"}", 400, "temperature", "number"},
      {"{\"prompt\": \"a\", \"top_p\": 0}", 400, "top_p", "(0, 1]"},
      {"{\"prompt\": \"a\", \"top_k\": -1}", 400, "top_k", "[0, "},
      {"{\"prompt\": \"a\", \"stop\": [\"a\", 1]}", 400, "stop", "strings"},
      {"{\"prompt\": \"a\", \"stop\": [\"\"]}", 400, "stop", "empty"},
      {"{\"prompt\": \"a\", \"stop\": [\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400, "stop", "up to 4"},
      {"{\"prompt\": \"a\", \"stop\": \"\xC3\"}", 400, "", "UTF-8"},  // half of é
      {"{\"prompt\": \"a\", \"stream\": 1}", 400, "stream", "true or false"},
      {"{\"prompt\": \"a\", \"n\": 2}", 400, "n", "must be 1"},
      {"{\"prompt\": \"a\", \"seed\": 1.5}", 400, "seed", "integer"},
      {"{\"prompt\": \"a\", \"logprobs\": 2}", 400, "logprobs", "not supported"},
      // A field it does not know is refused, as OpenAI refuses it: ignored, it would be
      // a setting the user believes took effect.
      {"{\"prompt\": \"a\", \"max_token\": 5}", 400, "max_token", "Unrecognized request argument supplied: max_token"},
      {"{\"prompt\": \"a\", \"repeat_penalty\": 1.1}", 400, "repeat_penalty", "this endpoint takes prompt, max_tokens"},
      {"{\"prompt\": \"a\", \"presence_penalty\": 0.5}", 400, "presence_penalty", "Unrecognized"},
      {"{\"prompt\": \"a\", \"logit_bias\": {\"1\": 5}}", 400, "logit_bias", "Unrecognized"},
  };
  expect_refused(cases, [&](const std::string& body) { serve::parse_completion(body, *tokenizer(), limits); });
  const auto r = serve::parse_completion(
      R"({"prompt": "ab", "max_tokens": 7, "temperature": 0, "top_k": 3, "seed": 5, "stop": "x", "stream": true,
          "model": "any", "user": "u", "n": 1, "logprobs": null, "frequency_penalty": 0, "logit_bias": {},
          "stream_options": {"include_usage": true}, "suffix": null})",
      *tokenizer(), limits);
  EXPECT_EQ(r.prompt.size(), 2u);
  EXPECT_EQ(r.sample.max_new_tokens, 7);
  EXPECT_TRUE(r.sample.greedy);
  EXPECT_EQ(r.sample.top_k, 3);
  EXPECT_TRUE(r.has_seed && r.seed == 5 && r.stream);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  // Without max_tokens, OpenAI's 16, but never past the server's --max-tokens: a client
  // that leaves the field out gets no more than one that sets it may ask for.
  EXPECT_EQ(serve::parse_completion(R"({"prompt": "a"})", *tokenizer(), limits).sample.max_new_tokens, 16);
  const serve::ApiLimits five{.max_tokens = 5, .max_prompt_tokens = 50};
  EXPECT_EQ(serve::parse_completion(R"({"prompt": "a"})", *tokenizer(), five).sample.max_new_tokens, 5);
}

// Every route that reads a body takes the fields docs/serve.md gives it, and refuses
// one it does not read with a 400 naming it, as OpenAI does: none ignores a setting the
// client believes took effect (llama-server's "n_probs", say).
TEST(ParseRequests, EachRouteTakesItsDocumentedFieldsAndRefusesAnyOther) {
  const serve::ApiLimits limits{.max_tokens = 100, .max_prompt_tokens = 50};
  const std::string sampling =
      R"("temperature": 0.5, "top_p": 0.9, "top_k": 3, "seed": 1, "stop": ["x"], "stream": false, "model": "m",
         "n": 1, "user": "u", "metadata": {}, "store": false, "service_tier": "auto", "stream_options": {},
         "frequency_penalty": 0, "presence_penalty": 0, "logit_bias": {})";
  using Parse = std::function<void(const std::string&)>;
  const Tokenizer& t = *tokenizer();
  const Parse completion = [&](const std::string& b) { serve::parse_completion(b, t, limits); };
  const Parse chat = [&](const std::string& b) { serve::parse_chat_completion(b, t, limits, 64); };
  const Parse attention = [&](const std::string& b) { serve::parse_attention(b, t, 16); };
  const std::vector<std::pair<std::string, Parse>> routes = {
      {R"("prompt": "ab", "max_tokens": 5, "best_of": 1, "echo": false, )" + sampling, completion},
      {R"("messages": [{"role": "user", "content": "ab"}], "max_tokens": 5, "max_completion_tokens": 5,
          "logprobs": false, )" + sampling, chat},
      {R"("content": "ab", "add_special": true, "with_pieces": false)",
       [&](const std::string& b) { serve::parse_tokenize(b, t, limits); }},
      {R"("tokens": [1, 2])", [&](const std::string& b) { serve::parse_detokenize(b, t); }},
      {R"("prompt": "ab")", attention},
      {R"("tokens": [1, 2])", attention},
  };
  for (const auto& [fields, parse] : routes) {
    try {
      parse("{" + fields + "}");
    } catch (const ApiError& e) {
      ADD_FAILURE() << "refused {" << fields << "}: " << e.what();
    }
    expect_refused({{"{" + fields + R"(, "n_probs": 3})", 400, "n_probs",
                     "Unrecognized request argument supplied: n_probs (this endpoint takes "}},
                   parse);
  }
}

// /v1/attention reads a prompt or token ids, not both: with both it used the ids and
// dropped the prompt without a word.
TEST(ParseRequests, AttentionTakesAPromptOrTokensNotBoth) {
  const testing::BytesWithStart bytes;
  expect_refused({{R"({"prompt": "ab", "tokens": [1, 2]})", 400, "tokens", "and prompt both say what to read"}},
                 [&](const std::string& body) { serve::parse_attention(body, bytes, 16); });
}

// /tokenize encodes a prompt: after the model's prompt start (an imported llama GGUF's
// BOS) unless "add_special" is false, as llama-server's field asks; "with_pieces" is
// read, and both must be booleans.
TEST(ParseRequests, TokenizePutsThePromptStartFirstUnlessAddSpecialIsFalse) {
  const serve::ApiLimits limits{.max_tokens = 100, .max_prompt_tokens = 50};
  const testing::BytesWithStart bytes;
  const std::vector<int32_t> ab = {'a', 'b'}, start_ab = {200, 'a', 'b'};
  EXPECT_EQ(serve::parse_tokenize(R"({"content": "ab"})", bytes, limits).ids, start_ab);
  EXPECT_EQ(serve::parse_tokenize(R"({"content": "ab", "add_special": true})", bytes, limits).ids, start_ab);
  EXPECT_EQ(serve::parse_tokenize(R"({"content": "ab", "add_special": false})", bytes, limits).ids, ab);
  EXPECT_FALSE(serve::parse_tokenize(R"({"content": "ab"})", bytes, limits).with_pieces);
  EXPECT_TRUE(serve::parse_tokenize(R"({"content": "ab", "with_pieces": true})", bytes, limits).with_pieces);
  expect_refused({{R"({"content": "ab", "add_special": 0})", 400, "add_special", "must be true or false, got number"},
                  {R"({"content": "ab", "with_pieces": "yes"})", 400, "with_pieces", "must be true or false, got string"}},
                 [&](const std::string& body) { serve::parse_tokenize(body, bytes, limits); });
}

// The answer: folio's pieces as a person reads them, or llama-server's with_pieces form,
// each piece the token's own text, or its bytes' values where they are not UTF-8.
TEST(ParseRequests, TokenizeAnswersWithPiecesAsLlamaServerDoes) {
  const testing::BytesWithStart bytes;  // é (C3 A9) is two tokens, each not UTF-8 alone
  const serve::TokenizeRequest r{{'a', ' ', 0xC3, 0xA9}, false};
  EXPECT_EQ(json::parse(serve::tokenize_json(r, bytes)),
            json({{"tokens", {'a', ' ', 0xC3, 0xA9}}, {"pieces", {"a", "\u2423", "<0xC3>", "<0xA9>"}}}))
      << serve::tokenize_json(r, bytes);
  const serve::TokenizeRequest with{r.ids, true};
  EXPECT_EQ(json::parse(serve::tokenize_json(with, bytes)),
            json({{"tokens", {{{"id", 'a'}, {"piece", "a"}}, {{"id", ' '}, {"piece", " "}},
                              {{"id", 0xC3}, {"piece", {0xC3}}}, {{"id", 0xA9}, {"piece", {0xA9}}}}}}));
}

// Batched slots give the text a thread per slot gives, request by request, past the
// context (block 16, 40 tokens: context shifts) and with more requests than slots.
TEST(Scheduler, BatchedSlotsMatchAThreadPerSlot) {
  for (nn::Positions pos : {nn::Positions::learned, nn::Positions::rope}) {
    const ModelCheckpoint ck = small_model(pos);
    std::vector<std::string> texts[2];
    for (bool batched : {true, false}) {
      serve::Scheduler s(ck, {.slots = 3, .queue = 8, .batched = batched});
      std::vector<std::shared_ptr<serve::Job>> jobs;
      for (int i = 0; i < 7; ++i) jobs.push_back(s.submit(request(i % 2 ? "abc" : "hello world", 40, 100 + i)));
      for (auto& job : jobs) {
        ASSERT_TRUE(job);
        std::string reason;
        texts[batched].push_back(finish(*job, &reason));
        EXPECT_EQ(reason, "length");
        EXPECT_EQ(job->completion_tokens(), 40);
      }
      EXPECT_EQ(s.stats().busy, 0);
      EXPECT_EQ(s.stats().served, 7);
    }
    EXPECT_EQ(texts[0], texts[1]);
    EXPECT_NE(texts[0][0], texts[0][2]);  // different seeds, different text
  }
}

TEST(Scheduler, BoundedQueueCancelAndStop) {
  const ModelCheckpoint ck = small_model();
  serve::Scheduler s(ck, {.slots = 1, .queue = 1});
  auto running = s.submit(request("abc", 1000000, 1));
  while (s.stats().busy == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto waiting = s.submit(request("abc", 5, 2));
  ASSERT_TRUE(running && waiting);
  EXPECT_FALSE(s.submit(request("abc", 5, 3)));  // the queue holds one
  running->cancel();  // freed at its next token; the waiting one then runs
  EXPECT_EQ(finish(*waiting).empty(), false);
  std::string reason;
  finish(*running, &reason);
  EXPECT_EQ(reason, "cancelled");
  auto cut = s.submit(request("abc", 1000000, 4));
  while (s.stats().busy == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  s.stop(std::chrono::milliseconds(50));  // the grace runs out: cut
  finish(*cut, &reason);
  EXPECT_EQ(reason, "length");
  EXPECT_FALSE(s.submit(request("abc", 5, 5)));
}

// A stop string ends the text before it, whatever tokens it spans.
TEST(Scheduler, StopStrings) {
  const ModelCheckpoint ck = small_model();
  serve::Scheduler s(ck, {.slots = 2});
  auto free_run = s.submit(request("abc", 60, 9));
  const std::string text = finish(*free_run);
  ASSERT_GE(text.size(), 20u);
  auto r = request("abc", 60, 9);
  r.stop = {text.substr(10, 3)};
  auto stopped = s.submit(r);
  std::string reason;
  const std::string cut = finish(*stopped, &reason);
  EXPECT_EQ(reason, "stop");
  EXPECT_EQ(cut, text.substr(0, text.find(r.stop[0])));
}


TEST_F(ServeRoutes, CompletionsStreamAndTheOtherRoutes) {
  start({});
  auto c = client();
  auto r = c.Post("/v1/completions", R"({"prompt": "abc", "max_tokens": 20, "seed": 1})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 20);
  EXPECT_EQ(j["usage"]["total_tokens"], 23);
  const std::string text = j["choices"][0]["text"];

  // The same request streamed: chunks whose texts add up to the same text, then [DONE].
  r = c.Post("/v1/completions", R"({"prompt": "abc", "max_tokens": 20, "seed": 1, "stream": true})",
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::string streamed, body = r->body, last;
  int chunks = 0;
  for (size_t at = 0; at < body.size();) {
    const size_t end = body.find("\n\n", at);
    ASSERT_NE(end, std::string::npos) << body;
    const std::string event = body.substr(at, end - at);
    ASSERT_EQ(event.rfind("data: ", 0), 0u) << event;
    last = event.substr(6);
    if (last != "[DONE]") {
      const json chunk = json::parse(last);
      streamed += chunk["choices"][0]["text"].get<std::string>();
      ++chunks;
    }
    at = end + 2;
  }
  EXPECT_EQ(last, "[DONE]");
  EXPECT_EQ(streamed, text);
  EXPECT_GE(chunks, 2);

  r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["data"][0]["id"], "tiny");
  r = c.Post("/tokenize", R"({"content": "abc"})", "application/json");
  ASSERT_TRUE(r);
  const json ids = json::parse(r->body)["tokens"];
  EXPECT_EQ(ids.size(), 3u);
  r = c.Post("/tokenize", R"({"content": "abc", "with_pieces": true})", "application/json");  // llama-server's form
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body), json({{"tokens", {{{"id", ids[0]}, {"piece", "a"}}, {{"id", ids[1]}, {"piece", "b"}},
                                                     {{"id", ids[2]}, {"piece", "c"}}}}}));
  r = c.Post("/detokenize", json({{"tokens", ids}}).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["content"], "abc");
  expect_error_object(c.Post("/detokenize", R"({"tokens": [1, 99999]})", "application/json"), 400, "tokens");

  // Attention: every layer and head, each query's row sums to 1.
  r = c.Post("/v1/attention", R"({"prompt": "hello"})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json a = json::parse(r->body);
  EXPECT_EQ(a["tokens"].size(), 5u);
  EXPECT_EQ(a["tokens"][0]["text"], "h");
  ASSERT_EQ(a["attention"].size(), 2u);
  for (const json& layer : a["attention"])
    for (const json& head : layer)
      for (size_t q = 0; q < head.size(); ++q) {
        ASSERT_EQ(head[q].size(), q + 1);
        double sum = 0;
        for (const json& w : head[q]) sum += w.get<double>();
        EXPECT_NEAR(sum, 1.0, 1e-3);
      }
  expect_error_object(c.Post("/v1/attention", json({{"prompt", std::string(17, 'a')}}).dump(), "application/json"),
                      400, "limit of 16");

  expect_error_object(c.Get("/nowhere"), 404, "no route GET /nowhere");
  expect_error_object(c.Post("/v1/completions", "{nope", "application/json"), 400, "not valid JSON");
  const json h = health();
  EXPECT_EQ(h["status"], "ok");
  EXPECT_EQ(h["slots_processing"], 0);
  r = c.Get("/");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("Attention explorer"), std::string::npos);
}

TEST_F(ServeRoutes, KeysLimitsAndAFullQueue) {
  serve::ServerOptions o;
  o.api_key = "s3cret";
  o.limits.max_tokens = 1000000;  // hold_a_slot's request takes them all
  o.scheduler.slots = 1, o.scheduler.queue = 0;
  o.max_body = 1000;
  start(o);
  auto c = client();
  const std::string body = R"({"prompt": "abc", "max_tokens": 3})";
  expect_error_object(c.Post("/v1/completions", body, "application/json"), 401, "no API key");
  expect_error_object(c.Post("/v1/completions", {{"Authorization", "Bearer s3creT"}}, body, "application/json"), 401,
                      "wrong API key");
  expect_error_object(c.Get("/v1/models", {{"Authorization", "Basic s3cret"}}), 401, "is not Bearer KEY");
  // The scheme is case-insensitive, as HTTP's are.
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "bearer s3cret"}})->status, 200);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "BEARER s3cret"}})->status, 200);
  EXPECT_EQ(c.Get("/health")->status, 200);  // open: a load balancer's probe has no key
  const httplib::Headers auth = {{"Authorization", "Bearer s3cret"}};
  auto r = c.Post("/v1/completions", auth, body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  expect_error_object(c.Post("/v1/completions", auth, std::string(2000, ' '), "application/json"), 413, "1000 bytes");

  // One slot, no queue: while a long request runs, the next gets 503 and Retry-After.
  const int hog = hold_a_slot("s3cret");
  r = c.Post("/v1/completions", auth, body, "application/json");
  expect_error_object(r, 503, "retry later");
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  ::close(hog);
}

// A raw connection that sends a request and hangs up: the slot is free again soon
// after, though the request asked for a million tokens.
TEST_F(ServeRoutes, AClientThatHangsUpFreesItsSlot) {
  serve::ServerOptions o;
  o.limits.max_tokens = 1000000;
  o.scheduler.slots = 2;
  start(o);
  for (bool stream : {true, false}) {
    const std::string body = cat(R"({"prompt": "abc", "max_tokens": 1000000, "stream": )", stream ? "true" : "false", "}");
    const int fd = connect_to(port);
    const std::string req = cat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
                                "Content-Length: ", body.size(), "\r\n\r\n", body);
    ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), ssize_t(req.size()));
    while (health()["slots_processing"] != 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ::close(fd);
    const auto t0 = std::chrono::steady_clock::now();
    while (health()["slots_processing"] != 0) {
      ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3)) << "stream " << stream;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace
}  // namespace folio

namespace folio {
namespace {

// A model whose tokenizer asks for a BOS before prompts (an imported GGUF's) is read
// from it, and the page labels it <bos>, as folio attention does: its text was empty.
TEST_F(ServeRoutes, AttentionLabelsTheBos) {
  const testing::TempDir dir("serve_bos");
  const auto tok = make_tokenizer({"bpe", 500}, testing::slurp(testing::write_small_corpus(dir.path / "text.txt", 20000)));
  TokenizerMetadata meta = tok->metadata();
  meta.emplace_back("tokenizer_prompt_start", "1");
  nn::GPTConfig c{.vocab_size = tok->vocab_size(), .block_size = 16, .n_layer = 1, .n_head = 2, .n_embd = 16};
  ck = ModelCheckpoint{std::make_unique<nn::GPT>(c), load_tokenizer(meta, "checkpoint"), 0, "test"};
  ck.model->eval();
  start({});
  const auto r = client().Post("/v1/attention", R"({"prompt": "We are"})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json tokens = json::parse(r->body)["tokens"];
  ASSERT_EQ(tokens.size(), tok->encode("We are").size() + 1) << tokens;
  EXPECT_EQ(tokens[0], json({{"id", 1}, {"text", "<bos>"}}));
}

}  // namespace
}  // namespace folio
