// folio serve's chat completions: the template, the request's checks, the turn's end at
// a blank line, and the route whole and streamed, in process.
#include "serve/chat.h"
#include "serve_support.h"

namespace folio {
namespace {

using namespace serve_test;

TEST(ChatPrompt, SpeakerTurnsThenTheAssistantsLabel) {
  EXPECT_EQ(serve::chat_prompt({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hail."}, {"user", "And?"}}),
            "System:\nBe brief.\n\nUser:\nHi\n\nAssistant:\nHail.\n\nUser:\nAnd?\n\nAssistant:\n");
  EXPECT_EQ(serve::chat_prompt({{"developer", "x"}}), "System:\nx\n\nAssistant:\n");
}

TEST(ParseChatCompletion, AnUnknownCharacterIsPlacedInItsOwnMessage) {
  // The template puts "System:\n...\n\nUser:\n" before the user's text: the position
  // must count from the start of the message that holds the character, not the template.
  const serve::ApiLimits limits{.max_tokens = 100, .max_prompt_tokens = 200};
  try {
    serve::parse_chat_completion(
        R"({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "ab\u0001"}]})",
        *tokenizer(), limits, 64);
    ADD_FAILURE() << "accepted a character the model lacks";
  } catch (const ApiError& e) {
    testing::expect_contains(e.what(), {"messages[1] (user) cannot be encoded", "at position 2"});
  }
}

TEST(ParseChatCompletion, RefusesBadMessagesWithTheirNames) {
  const serve::ApiLimits limits{.max_tokens = 100, .max_prompt_tokens = 200};
  const std::vector<BadRequest> cases = {
      {"{", 400, "", "not valid JSON"},
      {"{}", 400, "messages", "is required"},
      {R"({"messages": "hi"})", 400, "messages", "non-empty array"},
      {R"({"messages": []})", 400, "messages", "non-empty array"},
      {R"({"messages": [3]})", 400, "messages", "must be an object"},
      {R"({"messages": [{"content": "a"}]})", 400, "messages", "needs a role"},
      {R"({"messages": [{"role": "tool", "content": "a"}]})", 400, "messages", "role must be"},
      {R"({"messages": [{"role": "user"}]})", 400, "messages", "messages[0] (user) needs content"},
      {R"({"messages": [{"role": "user", "content": "a"}, 3]})", 400, "messages", "messages[1] must be an object"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}]})", 400, "messages",
       "messages[1] role must be"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": [3]}]})", 400, "messages",
       "messages[1] content parts must be"},
      {R"({"messages": [{"role": "user", "content": 7}]})", 400, "messages", "string or an array"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})", 400, "messages",
       "text only"},
      {R"({"messages": [{"role": "user", "content": "a\u0001"}]})", 400, "messages", "cannot be encoded"},
      {R"({"messages": [{"role": "user", "content": ")" + std::string(300, 'a') + "\"}]}", 400, "messages",
       "limit of 200"},
      {R"({"messages": [{"role": "user", "content": "a"}], "max_completion_tokens": 101})", 400,
       "max_completion_tokens", "[1, 100]"},
      {R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": 0})", 400, "max_tokens", "[1, 100]"},
      {R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": 5, "max_completion_tokens": 6})", 400,
       "max_tokens", "max_tokens is 5 but max_completion_tokens is 6"},
      {R"({"messages": [{"role": "user", "content": "a"}], "temperature": 3})", 400, "temperature", "[0, 2]"},
      {R"({"messages": [{"role": "user", "content": "a"}], "stop": [1]})", 400, "stop", "strings"},
      {R"({"messages": [{"role": "user", "content": "a"}], "n": 3})", 400, "n", "must be 1"},
      {R"({"messages": [{"role": "user", "content": "a"}], "tools": []})", 400, "tools", "not supported"},
      {R"({"messages": [{"role": "user", "content": "a"}], "logprobs": true})", 400, "logprobs", "not supported"},
      {R"({"messages": [{"role": "user", "content": "a"}], "prompt": "b"})", 400, "prompt",
       "Unrecognized request argument supplied: prompt"},
  };
  expect_refused(cases, [&](const std::string& body) { serve::parse_chat_completion(body, *tokenizer(), limits, 64); });
  const auto r = serve::parse_chat_completion(
      R"({"model": "m", "messages": [{"role": "system", "content": "be"}, {"role": "user",
          "content": [{"type": "text", "text": "ab"}, {"type": "text", "text": "c"}]}],
          "max_completion_tokens": 7, "seed": 5, "stop": "x", "stream": true, "logprobs": false, "user": "u"})",
      *tokenizer(), limits, 64);
  EXPECT_EQ(r.prompt, tokenizer()->encode("System:\nbe\n\nUser:\nabc\n\nAssistant:\n"));
  EXPECT_EQ(r.sample.max_new_tokens, 7);
  EXPECT_TRUE(r.has_seed && r.seed == 5 && r.stream);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "\n\n"}));
  const std::string both =
      R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": 9, "max_completion_tokens": 9})";
  EXPECT_EQ(serve::parse_chat_completion(both, *tokenizer(), limits, 64).sample.max_new_tokens, 9);  // the same: taken
  const std::string bare = R"({"messages": [{"role": "user", "content": "a"}]})";
  EXPECT_EQ(serve::parse_chat_completion(bare, *tokenizer(), limits, 64).sample.max_new_tokens,
            100);  // no max_tokens: as many as the server allows, up to the turn's end
}

// A conversation whose prompt leaves the reply no room in the context is refused as
// OpenAI refuses it (400, code context_length_exceeded), not cut to its last block_size
// tokens, which would lose the system message and the template's start. The boundary:
// the prompt and one reply token fit.
TEST(ParseChatCompletion, AConversationLongerThanTheContextIsRefusedNotCut) {
  const serve::ApiLimits limits{.max_tokens = 100};
  const int64_t template_tokens = int64_t(tokenizer()->encode("User:\n\n\nAssistant:\n").size());
  const auto body = [](size_t chars) {
    return json{{"messages", {{{"role", "user"}, {"content", std::string(chars, 'a')}}}}}.dump();
  };
  const int64_t context = 40, fits = context - 1 - template_tokens;
  EXPECT_EQ(int64_t(serve::parse_chat_completion(body(size_t(fits)), *tokenizer(), limits, context).prompt.size()),
            context - 1);
  try {
    serve::parse_chat_completion(body(size_t(fits + 1)), *tokenizer(), limits, context);
    ADD_FAILURE() << "a prompt of the whole context, with no room for the reply, was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "messages");
    testing::expect_contains(e.what(), {"maximum context length is 40 tokens", "resulted in 40 tokens"});
    const json j = json::parse(serve::error_json(e))["error"];
    EXPECT_EQ(j["code"], "context_length_exceeded") << j;
    EXPECT_EQ(j["type"], "invalid_request_error") << j;
  }
}

// The reply is the model's continuation of the template up to its first blank line:
// for seeds whose free continuation has one, the chat reply is the text before it.
TEST(Scheduler, ChatRepliesEndAtABlankLine) {
  const ModelCheckpoint ck = small_model(nn::Positions::learned, 48);
  serve::Scheduler s(ck, {.slots = 2});
  const serve::ApiLimits limits{.max_tokens = 100};
  int ended = 0;
  for (uint64_t seed = 1; seed <= 400 && ended < 3; ++seed) {
    const std::string body = cat(R"({"messages": [{"role": "user", "content": "abc"}], "temperature": 2, "seed": )",
                                 seed, "}");
    serve::CompletionRequest chat = serve::parse_chat_completion(body, *tokenizer(), limits, 48);
    serve::CompletionRequest free_run = chat;
    free_run.stop.clear();
    const std::string text = finish(*s.submit(free_run));
    const size_t blank = text.find("\n\n");
    if (blank == std::string::npos) continue;
    std::string reason;
    EXPECT_EQ(finish(*s.submit(chat), &reason), text.substr(0, blank)) << "seed " << seed;
    EXPECT_EQ(reason, "stop");
    ++ended;
  }
  EXPECT_EQ(ended, 3) << "too few seeds reached a blank line to test the turn's end";
}
TEST_F(ServeRoutes, ChatCompletionsWholeAndStreamed) {
  ck = small_model(nn::Positions::learned, 48);  // room for the template and a reply
  start({});
  auto c = client();
  const std::string ask = R"({"messages": [{"role": "user", "content": "abc"}], "max_tokens": 30, "seed": 4)";
  auto r = c.Post("/v1/chat/completions", ask + "}", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "tiny");
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["message"]["role"], "assistant");
  const std::string content = choice["message"]["content"];
  EXPECT_EQ(content.find("\n\n"), std::string::npos);
  EXPECT_TRUE(choice["finish_reason"] == "stop" || choice["finish_reason"] == "length");
  const int64_t prompt_tokens = int64_t(tokenizer()->encode("User:\nabc\n\nAssistant:\n").size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(j["usage"]["total_tokens"], prompt_tokens + j["usage"]["completion_tokens"].get<int64_t>());

  // Streamed: the role first, deltas that add up to the same content, the finish
  // reason and usage last, then [DONE].
  r = c.Post("/v1/chat/completions", ask + R"(, "stream": true})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<json> events = sse_events(r->body);
  ASSERT_GE(events.size(), 3u) << r->body;
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string streamed;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
    EXPECT_EQ(events[i]["id"], events[0]["id"]);
    const json& delta = events[i]["choices"][0]["delta"];
    if (delta.contains("content")) streamed += delta["content"].get<std::string>();
    EXPECT_EQ(events[i]["choices"][0]["finish_reason"].is_null(), i + 2 < events.size());
  }
  EXPECT_EQ(streamed, content);
  const json& last = events[events.size() - 2];
  EXPECT_EQ(last["choices"][0]["finish_reason"], choice["finish_reason"]);
  EXPECT_EQ(last["usage"], j["usage"]);

  expect_error_object(c.Post("/v1/chat/completions", R"({"messages": []})", "application/json"), 400, "messages");
  expect_error_object(c.Post("/v1/chat/completions", "{nope", "application/json"), 400, "not valid JSON");
}

// Over the route: a conversation too long for the context is a 400 in OpenAI's error
// object, whole or streamed, and the server serves on; a plain completion of the same
// text is still answered, the model reading its last block_size tokens.
TEST_F(ServeRoutes, ALongConversationIs400ContextLengthExceeded) {
  ck = small_model(nn::Positions::learned, 48);
  start({});
  auto c = client();
  const std::string long_text(400, 'a');
  const json messages = {{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", long_text}}};
  const json ask = {{"messages", messages}, {"max_tokens", 5}};
  const int64_t prompt_tokens = int64_t(tokenizer()->encode("System:\nbe brief\n\nUser:\n" + long_text +
                                                            "\n\nAssistant:\n").size());
  for (const bool stream : {false, true}) {
    json body = ask;
    body["stream"] = stream;
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const json e = json::parse(r->body)["error"];
    EXPECT_EQ(e["code"], "context_length_exceeded") << e;
    EXPECT_EQ(e["param"], "messages") << e;
    EXPECT_EQ(e["type"], "invalid_request_error") << e;
    testing::expect_contains(e["message"].get<std::string>(),
                             {"maximum context length is 48 tokens", cat("resulted in ", prompt_tokens, " tokens")});
  }
  auto r = c.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "abc"}], "max_tokens": 5})",
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = c.Post("/v1/completions", json{{"prompt", long_text}, {"max_tokens", 5}}.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["prompt_tokens"], 400);
}

// Chat goes through the same key, body limit and queue as completions.
TEST_F(ServeRoutes, ChatSharesKeysAndLimits) {
  serve::ServerOptions o;
  o.api_key = "s3cret";
  o.max_body = 1000;
  o.limits.max_tokens = 1000000;  // and hold_a_slot's request takes them all
  o.scheduler.slots = 1, o.scheduler.queue = 0;
  ck = small_model(nn::Positions::learned, 48);
  start(o);
  auto c = client();
  const std::string body = R"({"messages": [{"role": "user", "content": "abc"}], "max_tokens": 5})";
  expect_error_object(c.Post("/v1/chat/completions", body, "application/json"), 401, "no API key");
  const httplib::Headers auth = {{"Authorization", "Bearer s3cret"}};
  auto r = c.Post("/v1/chat/completions", auth, body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  expect_error_object(c.Post("/v1/chat/completions", auth, std::string(2000, ' '), "application/json"), 413,
                      "1000 bytes");
  expect_error_object(
      c.Post("/v1/chat/completions", auth, R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": 1000001})",
             "application/json"),
      400, "[1, 1000000]");
  const int hog = hold_a_slot("s3cret");
  r = c.Post("/v1/chat/completions", auth, body, "application/json");
  expect_error_object(r, 503, "retry later");
  ::close(hog);
}

}  // namespace
}  // namespace folio
