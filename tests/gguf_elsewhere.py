"""A small llama GGUF made the way llama.cpp's converter makes one for a llama-2-style
model, with llama.cpp's own gguf-py (GGUFWriter) and nothing of folio's: random weights
(seeded numpy, scaled so the next token is rarely a near tie), the tokenizer of a
SentencePiece BPE model Debian's spm_train made, its pieces, scores and types as the
converter's _set_vocab_sentencepiece lists them (byte pieces type 6, <unk> 2, <s> and
</s> 3), add_bos_token true, a feed-forward width that is not folio's default, and no
folio.* keys. For tests/test_gguf_elsewhere.sh.
    PYTHONPATH=LLAMA_CPP/gguf-py python3 gguf_elsewhere.py SPM.vocab OUT.gguf [TOKENIZER_MODEL]
TOKENIZER_MODEL (default "llama") is what tokenizer.ggml.model says: "bert" makes a file
folio must refuse. Also writes OUT.gguf.tokens.json, the token list, for decoding ids.
GGUF_ELSEWHERE_TINY=1 makes the model tiny, for fuzz/corpus-gguf's accept-llama-elsewhere.gguf.
"""
import json
import os
import sys

import numpy as np
import gguf

N_EMBD, N_HEAD, N_LAYER, N_FF, N_CTX = 64, 4, 2, 96, 128  # folio's SwiGLU default for 64 would be 192
if os.environ.get("GGUF_ELSEWHERE_TINY"):  # the fuzz corpus's seed (fuzz/corpus-gguf): a few kB
    N_EMBD, N_HEAD, N_LAYER, N_FF, N_CTX = 8, 2, 1, 12, 16


def vocabulary(vocab_path):
    """spm_train's .vocab (piece TAB score, in id order) with the converter's token types."""
    tokens, scores, types = [], [], []
    for line in open(vocab_path, encoding="utf-8"):
        piece, score = line.rstrip("\n").split("\t")
        tokens.append(piece)
        scores.append(float(score))
        if piece == "<unk>":
            types.append(gguf.TokenType.UNKNOWN)
        elif piece in ("<s>", "</s>"):
            types.append(gguf.TokenType.CONTROL)
        elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            types.append(gguf.TokenType.BYTE)
        else:
            types.append(gguf.TokenType.NORMAL)
    assert tokens[:3] == ["<unk>", "<s>", "</s>"], tokens[:3]
    return tokens, scores, types


def main(vocab_path, out_path, tokenizer_model="llama"):
    tokens, scores, types = vocabulary(vocab_path)
    V, C, HS = len(tokens), N_EMBD, N_EMBD // N_HEAD
    arch = gguf.MODEL_ARCH.LLAMA
    writer = gguf.GGUFWriter(out_path, gguf.MODEL_ARCH_NAMES[arch])
    # The hparams LlamaModel.set_gguf_parameters writes for a llama-2 config.json.
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(C)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(HS)
    writer.add_vocab_size(V)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model(tokenizer_model)
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)

    rng = np.random.default_rng(1234)
    names = gguf.TENSOR_NAMES

    def add(kind, shape, scale, block=None, offset=0.0):
        name = names[kind].format(bid=block) + ".weight"
        writer.add_tensor(name, (offset + scale * rng.standard_normal(shape)).astype(np.float32))

    T = gguf.MODEL_TENSOR
    add(T.TOKEN_EMBD, (V, C), 1.0)
    for b in range(N_LAYER):
        add(T.ATTN_NORM, (C,), 0.1, b, 1.0)
        add(T.ATTN_Q, (C, C), 0.1, b)
        add(T.ATTN_K, (C, C), 0.1, b)
        add(T.ATTN_V, (C, C), 0.2, b)
        add(T.ATTN_OUT, (C, C), 0.2, b)
        add(T.FFN_NORM, (C,), 0.1, b, 1.0)
        add(T.FFN_GATE, (N_FF, C), 0.2, b)
        add(T.FFN_UP, (N_FF, C), 0.2, b)
        add(T.FFN_DOWN, (C, N_FF), 0.2, b)
    add(T.OUTPUT_NORM, (C,), 0.1, None, 1.0)
    # The output rows of <unk>, <s> and </s> are zero (logit 0, far below the top of 400
    # logits of spread ~3): llama.cpp stops at </s>, folio generate does not, so neither
    # may choose it for the continuations to be compared.
    output = (0.3 * rng.standard_normal((V, C))).astype(np.float32)
    output[:3] = 0.0
    writer.add_tensor(names[T.OUTPUT] + ".weight", output)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    json.dump(tokens, open(out_path + ".tokens.json", "w", encoding="utf-8"))
    print(f"wrote {out_path}: llama, {V} tokens ({tokenizer_model}), n_embd {C}, feed_forward_length {N_FF}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
