#!/usr/bin/env python3
"""The loss of a chat checkpoint over the assistant tokens of a conversation file,
computed with numpy alone (scripts/folio_numpy.py's forward), for comparison with
`folio eval --data FILE.jsonl --split all`. The ChatML rendering is written here again,
from the template's definition, for a character vocabulary:
<|im_start|> is the id after the characters, <|im_end|> the one after it; each message
is <|im_start|>{role}\\n{content}<|im_end|>\\n, and the targets that count are an
assistant's content and its <|im_end|> (unless its "weight" is 0).

--count-user counts every target instead (the mask broken on purpose): its figure must
differ from folio's, or the comparison proves nothing.

    python3 tests/chat_loss_numpy.py CHECKPOINT FILE.jsonl [--count-user]
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import folio_numpy  # noqa: E402


def main():
    checkpoint, path = sys.argv[1], sys.argv[2]
    count_user = "--count-user" in sys.argv[3:]
    W, config, meta = folio_numpy.load(checkpoint)
    assert meta.get("tokenizer", "char") == "char" and "chat_template" in meta, "a char chat checkpoint"
    index = {c: i for i, c in enumerate(meta["vocab"])}
    im_start, im_end = len(index), len(index) + 1
    assert config["vocab_size"] == len(index) + 2
    total, counted = 0.0, 0
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            continue
        ids, weights = [], []
        for m in json.loads(line)["messages"]:
            w = 1 if m["role"] == "assistant" and m.get("weight", 1) == 1 else 0
            ids += [im_start] + [index[c] for c in m["role"] + "\n"] + [index[c] for c in m["content"]] + [im_end]
            weights += [0] * (1 + len(m["role"]) + 1) + [w] * len(m["content"]) + [w]
            ids.append(index["\n"])
            weights.append(0)
        x = np.array(ids[:-1])[None, :]
        y = np.array(ids[1:])
        keep = np.ones(len(y), dtype=bool) if count_user else np.array(weights[1:]) == 1
        logits = folio_numpy.forward(W, config, x)[0]
        logits = logits - logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        total -= logp[np.arange(len(y)), y][keep].sum()
        counted += int(keep.sum())
    print(f"{total / counted:.6f} {counted}")


if __name__ == "__main__":
    main()
