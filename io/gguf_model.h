#pragma once
// folio's model as llama.cpp reads it, and back: the mapping between a checkpoint (the
// GPT, its config and its tokenizer) and a GGUF file (io/gguf.h). docs/export.md says
// what maps and what does not.
//
// Architectures: learned positions are llama.cpp's `gpt2`, rope (rotate-half pairs
// (i, i + HS/2), GPT-NeoX's) is `gptneox` with a sequential residual. Both graphs are
// pre-LayerNorm blocks with GELU and a bias on every Linear; folio has none on q, k, v
// (and none at all with --no-bias), so zeros are written there. RMSNorm + SwiGLU + rope
// is `llama`: no biases, separate q, k, v, gate and up matrices, and a rope that rotates
// adjacent pairs (2i, 2i + 1), so each head's query and key rows are reordered
// (gguf_rope_rows). With --qk-norm it is `qwen3` instead: llama's graph with folio's
// rope order and a per-head q and k RMSNorm, written with weights of ones. Anything
// those graphs cannot compute is refused by name, with the flag that makes a model
// exportable.
//
// Tokenizers become llama.cpp's SentencePiece-style `llama` vocabulary:
//   char   a token per character (a space as U+2581), and after them the special
//          tokens llama.cpp needs ids for (<unk>, <s>, and </s> unless the vocabulary
//          has an end-of-text id): their embedding and output rows are zero, and they
//          are listed in tokenizer.ggml.suppress_tokens so llama.cpp never samples them
//   spm    the SentencePiece model's pieces, scores, types (byte pieces as bytes) and
//          special ids
// add_bos, add_eos and add_space_prefix are false: folio adds nothing to a prompt.
// folio's own tokenizer entries ride along under folio.tokenizer.* so that an import
// gives back the very same tokenizer.
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "io/gguf.h"
#include "nn/transformer.h"

namespace folio {

// The llama.cpp architecture a model of this config exports to: "llama" for --norm rms or
// --activation swiglu ("qwen3" with --qk-norm), else "gpt2" (learned positions) or
// "gptneox" (rope).
std::string gguf_architecture(const nn::GPTConfig& config);

// One head's query or key weight rows reordered between folio's rope, which rotates the
// pairs (i, i + HS/2), and llama's, which rotates (2i, 2i + 1) by the same angle
// theta_i: to_adjacent, row 2i takes row i and row 2i + 1 row i + HS/2; otherwise the
// inverse. Rotating adjacent pairs of the reordered q equals rotate-half of the
// original, reordered; q . k is unchanged, as both sides move alike.
//   in, out (HS, C), HS even
void gguf_rope_rows(const float* in, float* out, int64_t HS, int64_t C, bool to_adjacent);

// Why this model cannot be exported, one line per reason, each naming the option and
// the flag that would make it exportable; empty when it can. The model options' lines
// are their rows' GGUF answers (nn/model_options.h); the activation, the output bias
// and the tokenizer are checked here.
std::vector<std::string> gguf_refusals(const nn::GPTConfig& config, const Tokenizer& tokenizer);

// The model as a GGUF file; throws "[gguf] ..." listing gguf_refusals when there are any.
// Matrices are written as `dtype` (f16 where q8_0's blocks of 32 do not fit a row),
// norms and biases as f32. `name` is general.name.
GgufFile model_to_gguf(const nn::GPT& model, const Tokenizer& tokenizer, GgufDtype dtype, const std::string& name);

struct ImportedModel {
  std::unique_ptr<nn::GPT> model;
  std::unique_ptr<Tokenizer> tokenizer;
};
// A GGUF of an architecture folio exports (gpt2, gptneox, llama, qwen3) back into folio's
// model: with its folio.tokenizer.* entries (folio's own export), or made elsewhere with a
// tokenizer tokenizer_from_gguf takes; everything else is refused by name. `where` names
// the file in errors.
ImportedModel model_from_gguf(const GgufFile& file, const std::string& where);
// The tokenizer of a GGUF file without folio.tokenizer.* keys, from its tokenizer.ggml.*
// vocabulary: "llama" (SentencePiece-style) becomes an spm tokenizer whose prompts start
// with the BOS id when tokenizer.ggml.add_bos_token is true (its default); any other
// tokenizer.ggml.model is refused naming it (io/gguf_vocab_import.cpp).
std::unique_ptr<Tokenizer> tokenizer_from_gguf(const GgufFile& file, const std::string& where);

}  // namespace folio
