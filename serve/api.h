#pragma once
// The JSON shapes of folio serve's API, in OpenAI's completions format where one
// exists (llama-server's for /tokenize and /detokenize), apart from the HTTP server.
//
// What it holds:
//   ApiError              an error with its HTTP status and OpenAI error type
//   ApiLimits             what the server allows a request (tokens, prompt length)
//   CompletionRequest     POST /v1/completions's body, checked field by field
//   parse_completion      body -> CompletionRequest, or ApiError 400
//   completion_json       the whole response (stream: false)
//   completion_chunk      one Server-Sent Events chunk (stream: true)
//   error_json            {"error": {message, type, param, code}}
// Nothing here reads or writes a file: a request's fields are data, never paths.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "infer/sampling.h"

namespace folio::serve {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = "", std::string type = "", std::string code = "")
      : std::runtime_error(message),
        status(status),
        param(std::move(param)),
        type(std::move(type)),
        code(std::move(code)) {}
  int status;
  std::string param;  // the request field at fault ("" when none)
  std::string type;   // "" -> from the status: invalid_request_error, authentication_error, ...
  // OpenAI's code string (model_not_found, context_length_exceeded, invalid_api_key), or
  // "" -> null, as OpenAI sends for most errors: its clients type `code` as a string or
  // null, and the class of the error is the HTTP status's, never repeated here.
  std::string code;
};

struct ApiLimits {
  int64_t max_tokens = 1024;         // the largest max_tokens a request may ask for
  int64_t max_prompt_tokens = 4096;  // the model sees the last block_size of them
  double max_seconds = 60;           // a request's wall time, queue excluded
};

struct CompletionRequest {
  std::vector<int32_t> prompt;  // token ids, non-empty
  SampleOptions sample;         // max_new_tokens is the request's max_tokens
  bool has_seed = false;
  uint64_t seed = 0;
  std::vector<std::string> stop;  // up to 4, non-empty, valid UTF-8
  std::optional<int32_t> end_token;  // a chat model's end of turn (<|im_end|>): the reply stops there
  bool stream = false;
  std::string model;  // the request's "model" ("" when absent): the server checks it
};

// Checks every field; one it does not read is refused, as OpenAI refuses it (a few of
// OpenAI's that change nothing here, such as "user", are accepted: json_fields.h's
// Body). Throws ApiError 400 naming the field. So do the parsers below.
CompletionRequest parse_completion(const std::string& body, const Tokenizer& tokenizer, const ApiLimits& limits);

// {"content": "text"} -> token ids, as a prompt of that text is encoded: after the model's
// prompt start (an imported llama GGUF's BOS), unless "add_special" is false; with
// "with_pieces", each token is given as {"id", "piece"}, as llama-server gives it.
struct TokenizeRequest {
  std::vector<int32_t> ids;
  bool with_pieces = false;
};
TokenizeRequest parse_tokenize(const std::string& body, const Tokenizer& tokenizer, const ApiLimits& limits);
// Its answer: {"tokens": [ids], "pieces": [each token as a person reads it
// (visible_token)]}, or with_pieces {"tokens": [{"id", "piece"}]}, the piece as
// llama-server gives it: the token's own text, or its bytes' values where they are not
// UTF-8 (a character split between tokens).
std::string tokenize_json(const TokenizeRequest& r, const Tokenizer& tokenizer);
// {"tokens": [ids]} -> text. ApiError 400 on bad input.
std::vector<int32_t> parse_detokenize(const std::string& body, const Tokenizer& tokenizer);
// {"prompt": "text"} or {"tokens": [ids]} -> 1 to block_size token ids.
std::vector<int32_t> parse_attention(const std::string& body, const Tokenizer& tokenizer, int64_t block_size);

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};
std::string completion_json(const std::string& id, int64_t created, const std::string& model,
                            const std::string& text, const std::string& finish_reason, const Usage& usage);
// finish_reason "" -> null (more to come); the last chunk carries usage.
std::string completion_chunk(const std::string& id, int64_t created, const std::string& model,
                             const std::string& text, const std::string& finish_reason, const Usage* usage);
std::string error_json(const ApiError& e);

}  // namespace folio::serve
