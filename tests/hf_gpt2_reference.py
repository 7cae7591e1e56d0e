#!/usr/bin/env python3
"""An HF GPT-2 directory written from the published layout alone, and its logits from a
numpy forward pass written from the published GPT-2 equations: the independent side of
tests/test_hf_gpt2.sh. Nothing here reads folio's code or files.

    hf_gpt2_reference.py write DIR          a random 2-layer GPT-2: config.json,
                                            model.safetensors, vocab.json, merges.txt
    hf_gpt2_reference.py write-bare DIR     the same, its tensors named as GPT2Model saves
                                            them (no "transformer." prefix), with the
                                            older files' 0-d attn.masked_bias buffers
    hf_gpt2_reference.py write-inner DIR    the same with n_inner 24, not 4 x n_embd
    hf_gpt2_reference.py loss DIR TEXT      the mean cross-entropy over TEXT's
                                            non-overlapping windows of n_positions tokens
    hf_gpt2_reference.py logits DIR IDS OUT the logits (T, V) of the ids, as float64 .npy
    hf_gpt2_reference.py loss-ids DIR IDS   the mean cross-entropy of ids[1:] after ids[:-1]
                                            (any GPT-2 directory: sizes, activation and
                                            tied or not from its config.json)

The layout (HF's GPT2LMHeadModel): transformer.wte.weight (V, C), transformer.wpe.weight
(T, C), transformer.h.N.ln_1.{weight,bias} (C), h.N.attn.c_attn.weight (C, 3C) and
.bias (3C) (Conv1D: y = x W + b, columns [q | k | v], head h at h * C/n_head in each),
h.N.attn.c_proj.weight (C, C), ln_2, h.N.mlp.c_fc.weight (C, 4C), h.N.mlp.c_proj.weight
(4C, C), transformer.ln_f; the causal-mask buffer h.N.attn.bias (1, 1, T, T); lm_head
tied to wte. The vocabulary: the 256 bytes in GPT-2's byte-to-unicode order, a few
merges, and <|endoftext|>.
"""
import json
import math
import struct
import sys

import numpy as np

N_LAYER, N_HEAD, N_EMBD, N_POSITIONS = 2, 2, 16, 32
MERGES = [("q", "z"), ("qz", "x"), ("Ġ", "qz")]  # tokens the test text never contains


def bytes_to_unicode():
    """GPT-2's table: printable bytes stand for themselves, the rest take 256 onwards."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def vocabulary():
    """{token text: id}: the bytes in the table's order, the merges, <|endoftext|>."""
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    for a, b in MERGES:
        vocab[a + b] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return vocab


def save_safetensors(path, tensors):
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def load_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], "<f4").reshape(v["shape"])
            for k, v in header.items()}


def write(d, bare=False, inner=None):
    V, C, T = len(vocabulary()), N_EMBD, N_POSITIONS
    I = inner or 4 * C  # the feed-forward's width: n_inner, null for 4C
    rng = np.random.default_rng(2019)
    r = lambda *shape, s=0.3: (s * rng.standard_normal(shape)).astype(np.float32)
    W = {"transformer.wte.weight": r(V, C), "transformer.wpe.weight": r(T, C, s=0.1)}
    for l in range(N_LAYER):
        p = f"transformer.h.{l}."
        W.update({p + "ln_1.weight": 1 + r(C, s=0.1), p + "ln_1.bias": r(C, s=0.1),
                  p + "attn.bias": np.tril(np.ones((T, T), np.float32)).reshape(1, 1, T, T),
                  p + "attn.c_attn.weight": r(C, 3 * C), p + "attn.c_attn.bias": r(3 * C, s=0.2),
                  p + "attn.c_proj.weight": r(C, C), p + "attn.c_proj.bias": r(C, s=0.1),
                  p + "ln_2.weight": 1 + r(C, s=0.1), p + "ln_2.bias": r(C, s=0.1),
                  p + "mlp.c_fc.weight": r(C, I), p + "mlp.c_fc.bias": r(I, s=0.1),
                  p + "mlp.c_proj.weight": r(I, C, s=0.15), p + "mlp.c_proj.bias": r(C, s=0.1)})
    W.update({"transformer.ln_f.weight": 1 + r(C, s=0.1), "transformer.ln_f.bias": r(C, s=0.1)})
    if bare:
        W = {k.removeprefix("transformer."): v for k, v in W.items()}
        W.update({f"h.{l}.attn.masked_bias": np.array(-1e4, np.float32) for l in range(N_LAYER)})
    save_safetensors(f"{d}/model.safetensors", W)
    config = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
              "bos_token_id": V - 1, "eos_token_id": V - 1, "embd_pdrop": 0.1, "initializer_range": 0.02,
              "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": T, "n_embd": C, "n_head": N_HEAD,
              "n_inner": inner, "n_layer": N_LAYER, "n_positions": T, "resid_pdrop": 0.1,
              "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
              "summary_type": "cls_index", "summary_use_proj": True, "vocab_size": V}
    json.dump(config, open(f"{d}/config.json", "w"), indent=2)
    json.dump(vocabulary(), open(f"{d}/vocab.json", "w", encoding="utf-8"), ensure_ascii=False)
    with open(f"{d}/merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in MERGES))


def layer_norm(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def gelu_new(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def forward(d, ids):
    """ids (T,) -> logits (T, V) in float64, GPT-2's equations, with the sizes, activation
    and (un)tied output layer config.json gives."""
    W = {k.removeprefix("transformer."): v.astype(np.float64) for k, v in load_safetensors(f"{d}/model.safetensors").items()}
    config = json.load(open(f"{d}/config.json"))
    act = {"gelu_new": gelu_new, "gelu": gelu}[config["activation_function"]]
    T, C, H = len(ids), config["n_embd"], config["n_head"]
    hs = C // H
    x = W["wte.weight"][ids] + W["wpe.weight"][:T]
    causal = np.tril(np.ones((T, T), bool))
    for l in range(config["n_layer"]):
        p = f"h.{l}."
        a = layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"]) @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
        q, k, v = np.split(a, 3, axis=-1)  # (T, C) each, heads side by side
        heads = []
        for h in range(H):
            s = slice(h * hs, (h + 1) * hs)
            scores = np.where(causal, q[:, s] @ k[:, s].T / math.sqrt(hs), -np.inf)
            weights = np.exp(scores - scores.max(-1, keepdims=True))
            heads.append(weights / weights.sum(-1, keepdims=True) @ v[:, s])
        x = x + np.concatenate(heads, -1) @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        m = layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"]) @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"]
        x = x + act(m) @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    tied = config.get("tie_word_embeddings", True)  # HF's default
    return layer_norm(x, W["ln_f.weight"], W["ln_f.bias"]) @ W["wte.weight" if tied else "lm_head.weight"].T  # no bias


def mean_loss(logits, targets):
    """The mean cross-entropy of logits (T, V) against targets (T,)."""
    logits = logits - logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -logp[np.arange(len(targets)), targets].mean()


def encode(text):
    """Bytes to ids: the test text holds no merge, so each byte is its own token."""
    table, vocab = bytes_to_unicode(), vocabulary()
    return [vocab[table[b]] for b in text.encode()]


def main():
    if sys.argv[1] in ("write", "write-bare"):
        write(sys.argv[2], bare=sys.argv[1] == "write-bare")
    elif sys.argv[1] == "write-inner":  # n_inner 24, not 4 x n_embd
        write(sys.argv[2], inner=24)
    elif sys.argv[1] == "loss":  # as folio eval --split all: windows of T tokens, each predicting the next
        ids = np.array(encode(open(sys.argv[3], encoding="utf-8").read()))
        T = N_POSITIONS
        windows = (len(ids) - 1) // T
        total = sum(mean_loss(forward(sys.argv[2], ids[w * T:(w + 1) * T]), ids[w * T + 1:(w + 1) * T + 1])
                    for w in range(windows))
        print(f"loss {total / windows:.7f}")
    elif sys.argv[1] == "loss-ids":  # one window: ids[:-1] predicting ids[1:]
        ids = np.array([int(t) for t in sys.argv[3].split(",")])
        print(f"loss {mean_loss(forward(sys.argv[2], ids[:-1]), ids[1:]):.9f}")
    elif sys.argv[1] == "logits":
        np.save(sys.argv[4], forward(sys.argv[2], np.array([int(t) for t in sys.argv[3].split(",")])))


if __name__ == "__main__":
    main()
