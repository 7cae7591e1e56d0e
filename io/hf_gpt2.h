#pragma once
// folio's model in Hugging Face's GPT-2 layout, and back: a directory of config.json
// (model_type "gpt2"), model.safetensors and the tokenizer's vocab.json + merges.txt,
// as HF's GPT2LMHeadModel reads and writes it. docs/export.md says what maps.
//
// The tensors (C = n_embd, V = vocab_size, T = n_positions), with or without the
// "transformer." prefix:
//   wte.weight (V, C)   wpe.weight (T, C)   ln_f.weight, ln_f.bias (C)
//   h.N.ln_1.weight/bias (C)   h.N.ln_2.weight/bias (C)
//   h.N.attn.c_attn.weight (C, 3C) + bias (3C)   h.N.attn.c_proj.weight (C, C) + bias (C)
//   h.N.mlp.c_fc.weight (C, H) + bias (H)        h.N.mlp.c_proj.weight (H, C) + bias (C)
//   (H: config.json's n_inner, null for 4C; folio's --ffn-hidden)
//   lm_head.weight (V, C): absent or equal to wte (tied), else an untied output layer
// HF's Conv1D stores its weight (in, out), y = x W + b: folio's Linear is (out, in), so
// every one is transposed. c_attn's columns are [q | k | v], head h at h * HS inside
// each; folio keeps each head's key, query and value weights (HS, C) and one qkv_bias
// (n_head * 3 * HS) per head [k; q; v] (nn/attention.h). attn.bias and attn.masked_bias
// are buffers (the causal mask), not weights: they are skipped on import.
//
// The model: learned positions, LayerNorm (eps 1e-5), GELU's tanh form (gelu_new),
// --gpt2-biases (q, k and v biased, no output bias) and usually --tie-weights.
#include <string>
#include <vector>

#include "io/gguf_model.h"  // ImportedModel

namespace folio {

// The files of an HF GPT-2 directory, as write_hf writes them and model_from_hf reads them.
inline constexpr const char* kHfGpt2Files[] = {"config.json", "model.safetensors", "vocab.json", "merges.txt"};

// Reads DIR/config.json, DIR/model.safetensors and DIR/vocab.json + merges.txt. Anything
// that does not fit (another model_type, an unknown or unsupported config key, a
// missing or misshapen tensor, a tokenizer of another size) throws "[hf] DIR/FILE: ..."
// naming the key, tensor or file.
ImportedModel model_from_hf(const std::string& dir);

// Why GPT2LMHeadModel cannot hold this model, one line per reason, each naming the
// flag that would make it exportable; empty when it can. The model options' lines are
// their rows' HF answers (nn/model_options.h); the activation and biases are checked here.
std::vector<std::string> hf_refusals(const nn::GPTConfig& config);

// Writes config.json, model.safetensors and, for a bytebpe tokenizer, vocab.json and
// merges.txt into `dir` (created). Throws listing hf_refusals when there are any.
// Returns the files written.
std::vector<std::string> write_hf(const nn::GPT& model, const Tokenizer& tokenizer, const std::string& dir);

}  // namespace folio
