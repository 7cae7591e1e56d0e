#!/usr/bin/env python3
"""Writes the hand-made regression inputs of fuzz/corpus from a tiny real run.

    build/folio train --data hello.txt --out /tmp/tiny --n-layer 1 --n-head 1 --n-embd 4 \
        --block-size 4 --batch-size 2 --max-iters 4 --eval-interval 2 --eval-iters 1 --no-bias
    python3 fuzz/make_regressions.py /tmp/tiny fuzz/corpus

(hello.txt: "hello world\\n" 200 times.) Names say what tests/test_fuzz_corpus.cpp
expects: accept-* must load (as a model or a training state), reject-* must be
refused by both readers with a folio::Error. Each one is a damaged copy of a real
checkpoint that the reader used to get wrong.
"""
import json
import os
import struct
import sys


def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def save(path, header, data):
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + data)


def edit_meta(header, key, fn):
    h = json.loads(json.dumps(header))
    h["__metadata__"][key] = fn(h["__metadata__"][key])
    return h


def edit_train_config(header, field, value):
    def fn(text):
        c = json.loads(text)
        c[field] = value
        return json.dumps(c, separators=(",", ":"))
    return edit_meta(header, "train_config", fn)


def drop_train_config(header, field):
    def fn(text):
        c = json.loads(text)
        c.pop(field, None)
        return json.dumps(c, separators=(",", ":"))
    return edit_meta(header, "train_config", fn)


def with_float(header, data, tensor, value):
    begin = header[tensor]["data_offsets"][0]
    d = bytearray(data)
    d[begin:begin + 4] = struct.pack("<f", value)
    return bytes(d)


def main(run, out):
    state, sdata = load(os.path.join(run, "state.safetensors"))
    model, mdata = load(os.path.join(run, "model.safetensors"))
    files = {
        "accept-model": (model, mdata),
        "accept-state": (state, sdata),
        # TrainConfig::validate() accepts any finite lr; the reader capped it at 1e3, so
        # a run trained with --lr 2000 could not be resumed (or shown by folio info).
        "accept-state-lr-1e6": (edit_train_config(state, "lr", 1e6), sdata),
        "reject-state-lr-1e39": (edit_train_config(state, "lr", 1e39), sdata),  # not a float
        # std::stoull took these as seeds: "-1" as 2^64-1, " 12" and "12abc" as 12.
        "reject-state-seed-minus1": (edit_train_config(state, "seed", "-1"), sdata),
        "reject-state-seed-space": (edit_train_config(state, "seed", " 12"), sdata),
        "reject-state-seed-trailing": (edit_train_config(state, "seed", "12abc"), sdata),
        "reject-state-seed-plus": (edit_train_config(state, "seed", "+7"), sdata),
        # Leading zeros: "0337" read as 337 and was written back as "337" (found by
        # scripts/fuzz.sh); a number stored as text is read only in the form folio writes.
        "reject-state-seed-leading-zero": (edit_train_config(state, "seed", "0337"), sdata),
        "reject-state-rng-leading-zero": (edit_meta(state, "data_rng", lambda t: json.dumps(
            ["0" + w for w in json.loads(t)], separators=(",", ":"))), sdata),
        # best_val_loss beyond float range read back as infinity.
        "reject-state-best-val-1e300": (edit_meta(state, "best_val_loss", lambda _: "1e300"), sdata),
        "reject-state-best-val-neg": (edit_meta(state, "best_val_loss", lambda _: "-3.5e38"), sdata),
        # Non-finite numbers were copied into the model / optimizer as they were.
        "reject-state-v-nan": (state, with_float(state, sdata, "adamw.v", float("nan"))),
        "reject-state-v-negative": (state, with_float(state, sdata, "adamw.v", -1.0)),
        "reject-state-m-inf": (state, with_float(state, sdata, "adamw.m", float("-inf"))),
        "reject-model-weight-inf": (model, with_float(model, mdata, "token_embedding.weight", float("inf"))),
        "reject-model-weight-nan": (model, with_float(model, mdata, "lm_head.weight", float("nan"))),
        # dtype came with --dtype bf16: runs saved before it have none, and resume in fp32.
        "accept-state-without-dtype": (drop_train_config(state, "dtype"), sdata),
        "accept-state-dtype-bf16": (edit_train_config(state, "dtype", "bf16"), sdata),
        "reject-state-dtype-fp16": (edit_train_config(state, "dtype", "fp16"), sdata),
        "reject-state-dtype-number": (edit_train_config(state, "dtype", 16), sdata),
    }
    os.makedirs(out, exist_ok=True)
    for name, (header, data) in files.items():
        save(os.path.join(out, name + ".safetensors"), header, data)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
