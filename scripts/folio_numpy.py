#!/usr/bin/env python3
"""Loads a folio checkpoint with numpy alone, runs the model's forward pass, and
prints its loss on a text exactly as `folio eval` computes it (same split, same
non-overlapping windows of block_size tokens): a second, independent reading of
the safetensors format and of the model, and a start for anyone porting a model out.

A char checkpoint's vocabulary is in its metadata; a SentencePiece one ("tokenizer":
"spm") carries its model, base64, which Debian's python3-sentencepiece reads.
--ids FILE takes the tokens of the chosen split as whitespace-separated ids instead
of tokenizing --data (then nothing but numpy is needed).

    python3 scripts/folio_numpy.py --checkpoint runs/x --data data/tinyshakespeare.txt
"""
import base64
import argparse
import json
import math
import os
import struct
import sys

import numpy as np


def load(path):
    """The weights (name -> float32 array), the model config and the metadata."""
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__")
    weights = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", f"{name}: dtype {t['dtype']}"
        begin, end = t["data_offsets"]
        weights[name] = np.frombuffer(raw[8 + n + begin:8 + n + end], dtype="<f4").reshape(t["shape"])
    return weights, json.loads(meta["config"]), meta


def encoder(meta):
    """text -> list of token ids, with the checkpoint's tokenizer."""
    if meta.get("tokenizer", "char") == "spm":
        import sentencepiece  # Debian: python3-sentencepiece
        sp = sentencepiece.SentencePieceProcessor(model_proto=base64.b64decode(meta["tokenizer_model"]))
        return lambda text: sp.encode(text)
    index = {c: i for i, c in enumerate(meta["vocab"])}

    def encode(text):
        missing = sorted(set(text) - set(index))
        if missing:
            sys.exit(f"characters not in the model's vocabulary: {missing[:5]}")
        return [index[c] for c in text]
    return encode


def layer_norm(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)  # biased, as torch.nn.LayerNorm
    return (x - mean) / np.sqrt(var + eps) * w + b


def norm(x, W, name):
    """LayerNorm, or with --norm rms (no bias stored) llama's RMSNorm, eps 1e-5."""
    if name + ".bias" in W:
        return layer_norm(x, W[name + ".weight"], W[name + ".bias"])
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-5) * W[name + ".weight"]


def linear(x, W, name):
    y = x @ W[name + ".weight"].T
    return y + W[name + ".bias"] if name + ".bias" in W else y


def rms_norm(x, eps=1e-6):
    """QK-norm: x / sqrt(mean(x^2) + eps) over the head's dimensions, no weight."""
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps)


def rope(x, base=10000.0):
    """x (B, T, hs): the pair (i, i + hs/2) of position t turned by t * base^(-2i/hs)."""
    T, hs = x.shape[-2], x.shape[-1]
    h = hs // 2
    angle = np.arange(T)[:, None] * base ** (-2.0 * np.arange(h) / hs)  # (T, hs/2)
    cos, sin = np.cos(angle), np.sin(angle)
    x0, x1 = x[..., :h], x[..., h:]
    return np.concatenate([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1)


ERF = np.vectorize(math.erf)
ACTIVATIONS = {
    "relu": lambda h: np.maximum(h, 0),
    "relu2": lambda h: np.maximum(h, 0) ** 2,
    "gelu": lambda h: 0.5 * h * (1 + ERF(h / math.sqrt(2))),
    # fc's outputs are [gate (H); up (H)]: SiLU(gate) * up
    "swiglu": lambda h: h[..., :h.shape[-1] // 2] / (1 + np.exp(-h[..., :h.shape[-1] // 2])) * h[..., h.shape[-1] // 2:],
    # GPT-2's "gelu_new": the tanh approximation
    "gelu-tanh": lambda h: 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3))),
}


def forward(W, config, ids):
    """ids (B, T) -> logits (B, T, vocab_size), in float64. The model options absent
    from a config (checkpoints saved before them) take their defaults: off."""
    B, T = ids.shape
    C, n_head = config["n_embd"], config["n_head"]
    hs = C // n_head
    use_rope = config.get("pos", "learned") == "rope"
    qk_norm = config.get("qk_norm", False)
    softcap = config.get("logit_softcap", 0.0)
    if config.get("tie_weights", False):  # one (V, C) matrix, stored once, used twice
        W = dict(W, **{"lm_head.weight": W["token_embedding.weight"]})
    x = W["token_embedding.weight"][ids].astype(np.float64)
    if config.get("bigram", False):  # row previous * V + id; the first token's previous is V
        V = config["vocab_size"]
        previous = np.concatenate([np.full((B, 1), V), ids[:, :-1]], axis=1)
        x = x + W["bigram_embedding.weight"][previous * V + ids]
    if not use_rope:
        x = x + W["position_embedding.weight"][:T]
    mask = np.tril(np.ones((T, T), dtype=bool))
    x0 = x  # the embedding, which the x0 shortcut adds into every block's input
    n_layer = config["n_layer"]
    pairs = n_layer // 2 if config.get("unet_skips", False) else 0
    encoder_outputs = []  # U-net skips: the first `pairs` blocks' outputs, taken back in reverse
    for l in range(n_layer):
        p = f"blocks.{l}."
        if config.get("x0_shortcut", False):
            x = x + W[f"x0_gates.{l}"] * x0
        if l >= n_layer - pairs:  # the last block takes block 0's output, the one before it block 1's...
            x = x + W[f"skip_gates.{l - (n_layer - pairs)}"] * encoder_outputs[n_layer - 1 - l]
        h = norm(x, W, p + "ln1")
        heads = []
        for i in range(n_head):
            k, q, v = (linear(h, W, f"{p}attn.heads.{i}.{name}") for name in ("key", "query", "value"))
            if config.get("gpt2_biases", False):  # qkv_bias: per head [k; q; v], hs each
                b = W[p + "attn.qkv_bias"][i * 3 * hs:(i + 1) * 3 * hs]
                k, q, v = k + b[:hs], q + b[hs:2 * hs], v + b[2 * hs:]
            if config.get("value_embed", False):  # the token's vector, head i's slice of it
                v = v + W[f"value_embeddings.{l}.weight"][ids][..., i * hs:(i + 1) * hs]
            if qk_norm:
                k, q = rms_norm(k), rms_norm(q)
            if use_rope:
                k, q = rope(k), rope(q)
            scores = np.where(mask, q @ k.transpose(0, 2, 1) / math.sqrt(hs), -np.inf)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            heads.append((scores / scores.sum(-1, keepdims=True)) @ v)
        x = x + linear(np.concatenate(heads, -1), W, p + "attn.proj")
        h = linear(norm(x, W, p + "ln2"), W, p + "ffwd.fc")
        x = x + linear(ACTIVATIONS[config["activation"]](h), W, p + "ffwd.proj")
        if l < pairs:
            encoder_outputs.append(x)
    logits = linear(norm(x, W, "ln_f"), W, "lm_head")
    return softcap * np.tanh(logits / softcap) if softcap > 0 else logits


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="out", help="run directory or .safetensors file")
    ap.add_argument("--data", default=os.path.join(here, "..", "data", "tinyshakespeare.txt"))
    ap.add_argument("--split", default="val", choices=["val", "train", "all"])
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--ids", help="the split's token ids (whitespace-separated), instead of tokenizing --data")
    args = ap.parse_args()

    W, config, meta = load(args.checkpoint)
    if args.ids:
        tokens = np.array([int(t) for t in open(args.ids).read().split()], dtype=np.int64)
    else:
        # folio splits the text at character floor(characters * train fraction), then
        # tokenizes each part on its own.
        text = open(args.data, encoding="utf-8", newline="").read()
        n_train = math.floor(len(text) * (1.0 - args.val_fraction))
        part = {"train": text[:n_train], "val": text[n_train:], "all": text}[args.split]
        tokens = np.array(encoder(meta)(part), dtype=np.int64)
    T = config["block_size"]
    windows = (len(tokens) - 1) // T
    if windows < 1:
        sys.exit(f"{args.data}: the {args.split} text is shorter than block_size + 1 = {T + 1}")
    total = 0.0
    for w in range(0, windows, args.batch_size):
        n = min(args.batch_size, windows - w)
        x = tokens[w * T:(w + n) * T].reshape(n, T)
        y = tokens[w * T + 1:(w + n) * T + 1].reshape(n, T)
        logits = forward(W, config, x)
        logits = logits - logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        total -= np.take_along_axis(logp, y[..., None], -1).sum()
    loss = total / (windows * T)
    print(f"loss {loss:.6f}  ({windows} windows of {T} tokens)")


if __name__ == "__main__":
    main()
