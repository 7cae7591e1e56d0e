#!/usr/bin/python3
"""Writes tests/data/gpt_reference.safetensors: PyTorch's logits, loss and gradients of a
small folio GPT, for tests/test_reference.cpp (in the manner of llm.c's test_gpt2).

Regenerate (Debian's python3-torch, not the pyenv python3 on PATH):
    apt-get install -y --no-install-recommends python3-torch
    /usr/bin/python3 bench/peer/make_reference.py            # writes tests/data/...
    /usr/bin/python3 bench/peer/make_reference.py --out FILE # elsewhere
The output depends only on this script (numpy's RandomState draws the weights), not on
folio: regenerate it only when folio's model is meant to change, and say why.

The model is written out from the specification rather than copied from folio or from
torch_gpt.py (which packs key/query/value): every head has its own key, query and value
Linear without bias, so the parameter names are folio's nn::GPT::named_parameters():
  token_embedding.weight (V, C), position_embedding.weight (block_size, C)
  blocks.L.ln1.{weight,bias}
  blocks.L.attn.heads.H.{key,query,value}.weight (head_size, C)
  blocks.L.attn.proj.{weight,bias}, blocks.L.ln2.{weight,bias}
  blocks.L.ffwd.fc.{weight,bias} (4C, C), blocks.L.ffwd.proj.{weight,bias} (C, 4C)
  ln_f.{weight,bias}, lm_head.{weight,bias} (V, C)
Forward: x = tok[ids] + pos[0..T); per block x += attn(ln1(x)), x += ffwd(ln2(x)) with
attn = proj(concat_h softmax(causal(q k^T * head_size**-0.5)) v), ffwd = proj(act(fc(x)));
logits = lm_head(ln_f(x)); loss = mean cross-entropy. LayerNorm eps 1e-5, GELU exact
(erf), dropout 0 (absent).

Weights are not folio's init (N(0, 0.02), LayerNorm 1/0) but larger and with non-trivial
LayerNorms and biases, so that every path carries a visible gradient. They are drawn in
float64, rounded to float32 (what the file and folio hold), and the forward and backward
run in float64 on those float32 values: the stored logits, loss and gradients are the
exact answer for folio's float32 weights, rounded once to float32. The script also runs
the same model in float32 and prints how far that lands from float64, as a yardstick
for the test's tolerances.

File contents (all F32; ids and targets are small integers, exact in float):
  __metadata__      config (vocab_size, block_size, n_layer, n_head, n_embd, bias,
                    dropout, layer_norm_eps), batch (B, T), activations, how it was made
  ids, targets      (B, T)
  <name>            every parameter, folio's names and shapes
  <act>.logits      (B, T, V) for act in activations (gelu, relu)
  <act>.loss        () mean cross-entropy
  <act>.grad.<name> d loss / d parameter, same shape as the parameter
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

CONFIG = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16, bias=True, dropout=0.0)
B, T = 2, 8
ACTIVATIONS = ("gelu", "relu")
SEED = 20240531
EPS = 1e-5


class Head(nn.Module):
    def __init__(self, C, hs):
        super().__init__()
        self.key = nn.Linear(C, hs, bias=False)
        self.query = nn.Linear(C, hs, bias=False)
        self.value = nn.Linear(C, hs, bias=False)

    def forward(self, x):
        T, hs = x.shape[1], self.key.weight.shape[0]
        k, q, v = self.key(x), self.query(x), self.value(x)
        wei = (q @ k.transpose(-2, -1)) * hs ** -0.5
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        wei = F.softmax(wei.masked_fill(~mask, float("-inf")), dim=-1)
        return wei @ v


class MultiHead(nn.Module):
    def __init__(self, C, n_head):
        super().__init__()
        self.heads = nn.ModuleList(Head(C, C // n_head) for _ in range(n_head))
        self.proj = nn.Linear(C, C, bias=CONFIG["bias"])

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in self.heads], dim=-1))


class FeedForward(nn.Module):
    def __init__(self, C, act):
        super().__init__()
        self.fc = nn.Linear(C, 4 * C, bias=CONFIG["bias"])
        self.proj = nn.Linear(4 * C, C, bias=CONFIG["bias"])
        self.act = act

    def forward(self, x):
        h = self.fc(x)
        return self.proj(F.gelu(h) if self.act == "gelu" else F.relu(h))  # gelu: exact, erf


class Block(nn.Module):
    def __init__(self, C, n_head, act):
        super().__init__()
        self.ln1 = nn.LayerNorm(C, eps=EPS)
        self.attn = MultiHead(C, n_head)
        self.ln2 = nn.LayerNorm(C, eps=EPS)
        self.ffwd = FeedForward(C, act)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffwd(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, act):
        super().__init__()
        c = CONFIG
        self.token_embedding = nn.Embedding(c["vocab_size"], c["n_embd"])
        self.position_embedding = nn.Embedding(c["block_size"], c["n_embd"])
        self.blocks = nn.ModuleList(Block(c["n_embd"], c["n_head"], act) for _ in range(c["n_layer"]))
        self.ln_f = nn.LayerNorm(c["n_embd"], eps=EPS)
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=c["bias"])

    def forward(self, ids, targets):
        x = self.token_embedding(ids) + self.position_embedding(torch.arange(ids.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


def draw_weights(names_shapes, rng):
    """float32 values, drawn in folio's parameter order (so the draw is stable)."""
    out = {}
    for name, shape in names_shapes:
        if ".ln" in name or name.startswith("ln_f"):  # LayerNorm: around 1 and 0
            w = (1.0 if name.endswith(".weight") else 0.0) + 0.1 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            w = 0.1 * rng.standard_normal(shape)
        elif "embedding" in name:
            w = 0.3 * rng.standard_normal(shape)
        else:  # Linear weights: std 0.2, enough to move attention away from uniform
            w = 0.2 * rng.standard_normal(shape)
        out[name] = w.astype(np.float32)
    return out


def run(act, weights, ids, targets, dtype):
    model = GPT(act).to(dtype)
    params = dict(model.named_parameters())
    assert list(params) == list(weights), "parameter names or order differ"
    with torch.no_grad():
        for name, p in params.items():
            assert tuple(p.shape) == weights[name].shape, name
            p.copy_(torch.from_numpy(weights[name]).to(dtype))
    logits, loss = model(ids, targets)
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in params.items()}
    return logits.detach(), loss.detach(), grads


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, float32 numpy array). The format io/safetensors.h reads."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "data", "gpt_reference.safetensors"))
    args = p.parse_args()
    torch.set_num_threads(1)

    rng = np.random.RandomState(SEED)
    names_shapes = [(n, tuple(t.shape)) for n, t in GPT("gelu").named_parameters()]
    weights = draw_weights(names_shapes, rng)
    ids = torch.from_numpy(rng.randint(0, CONFIG["vocab_size"], size=(B, T)).astype(np.int64))
    targets = torch.from_numpy(rng.randint(0, CONFIG["vocab_size"], size=(B, T)).astype(np.int64))

    tensors = [("ids", ids.numpy().astype(np.float32)), ("targets", targets.numpy().astype(np.float32))]
    tensors += [(n, w) for n, w in weights.items()]
    for act in ACTIVATIONS:
        logits, loss, grads = run(act, weights, ids, targets, torch.float64)
        tensors.append((f"{act}.logits", logits.float().numpy()))
        tensors.append((f"{act}.loss", np.array(loss.item(), dtype=np.float32)))
        tensors += [(f"{act}.grad.{n}", g.float().numpy()) for n, g in grads.items()]

        # The yardstick: float32 PyTorch against the float64 answer.
        l32, loss32, g32 = run(act, weights, ids, targets, torch.float32)
        worst = max(((g32[n].double() - g).abs().max().item() / g.abs().max().item(), n) for n, g in grads.items())
        print(f"{act}: loss {loss.item():.6f}; float32 torch: logits max abs err "
              f"{(l32.double() - logits).abs().max().item():.2e}, loss err {abs(loss32.item() - loss.item()):.2e}, "
              f"worst gradient max abs err / max |grad| {worst[0]:.2e} ({worst[1]})")

    meta = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in CONFIG.items()}
    meta.update(layer_norm_eps=str(EPS), B=str(B), T=str(T), activations=",".join(ACTIVATIONS),
                computed_in="float64 from the float32 weights, stored as float32",
                made_by="bench/peer/make_reference.py", torch=torch.__version__, seed=str(SEED))
    out = os.path.normpath(args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    write_safetensors(out, tensors, meta)
    print(f"wrote {out}: {len(tensors)} tensors, {os.path.getsize(out)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
