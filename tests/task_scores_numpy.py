#!/usr/bin/env python3
"""Scores a multiple-choice task file with a folio checkpoint, by numpy alone: the
independent scorer `folio eval --task` is held against (tests/test_task_eval.sh).

It shares nothing with folio but the file formats: the weights and the forward pass are
scripts/folio_numpy.py's, the tokenizer is the checkpoint's own (a char vocabulary, or
its SentencePiece model through python3-sentencepiece, with the id it puts before a
prompt if it has one), and the rule is written out here from lm-evaluation-harness's
code:
  - context and continuation " " + choice are tokenized on their own, after the
    context's trailing whitespace moves onto the continuation (_encode_pair);
  - the model reads (context + continuation)[-(block_size + 1):][:-1], one choice at a
    time, and the continuation's tokens' log-probabilities are summed;
  - pred = argmax(sums), pred_norm = argmax(sums / len(choice)) (completion_len: code
    points, no leading space); numpy's argmax keeps the first of equals.
A generative item ({"prompt", "answer"}, or GSM8K's {"question", "answer"}) is written
greedily: the model reads the last block_size tokens of prompt + text so far, takes the
argmax, until --max-new-tokens or a stop string; its text and the answer are compared
after lm-eval's gsm8k normalisation (what follows the last "####", without commas,
dollar signs or a final period; trimmed). It prints output, pred, label, exact_match.

Each multiple-choice item prints as one JSON line: logprobs, pred, pred_norm, label, cut, and the
argmax over sums / continuation tokens (pred_norm_tokens, llm.c's normalisation) and
over sums / UTF-8 bytes (pred_norm_bytes), which the test uses to show that it tells
them from characters.

    python3 tests/task_scores_numpy.py --checkpoint runs/x --task hellaswag_val.jsonl
"""
import argparse
import base64
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import folio_numpy  # noqa: E402  (load, encoder, forward)


def item_of(d):
    """(context, choices, label) of one line, in any of the three layouts."""
    if "endings" in d:  # HellaSwag: ctx as llm.c reads it
        return d["ctx"], d["endings"], int(d["label"])
    if "question" in d:  # ARC, as lm-eval's arc_easy.yaml words it
        q = d["question"]
        labels = [c["label"] for c in q["choices"]]
        return "Question: " + q["stem"] + "\nAnswer:", [c["text"] for c in q["choices"]], labels.index(d["answerKey"])
    return d["context"], d["choices"], int(d["answer"])


def normalised(text):
    if "####" in text:
        text = text.split("####")[-1].strip().replace(",", "").replace("$", "")
        text = text[:-1] if text.endswith(".") else text
    return text.strip()


def decoder(meta):
    """list of token ids -> text, with the checkpoint's tokenizer."""
    if meta.get("tokenizer", "char") == "spm":
        import sentencepiece
        sp = sentencepiece.SentencePieceProcessor(model_proto=base64.b64decode(meta["tokenizer_model"]))
        return lambda ids: sp.decode(ids)
    return lambda ids: "".join(meta["vocab"][i] for i in ids)


def greedy(W, config, prompt, decode, max_new_tokens, stops):
    """The text written greedily after the prompt's ids, cut before the first stop, and
    whether a stop came."""
    T, ids, out = config["block_size"], list(prompt), []
    for _ in range(max_new_tokens):
        logits = folio_numpy.forward(W, config, np.array([ids[-T:]], dtype=np.int64))[0, -1]  # (V)
        out.append(int(np.argmax(logits)))
        ids.append(out[-1])
        text = decode(out)
        cuts = [text.find(s) for s in stops if s in text]
        if cuts:
            return text[:min(cuts)], True
    return decode(out), False


def encode_pair(encode, context, continuation):
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    return encode(context), encode(continuation)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--task", required=True)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--stop", action="append")
    args = ap.parse_args()
    W, config, meta = folio_numpy.load(args.checkpoint)
    encode = folio_numpy.encoder(meta)
    # An imported llama GGUF's tokenizer puts its BOS before every prompt (folio's
    # Tokenizer::prompt_start, stored as tokenizer_prompt_start).
    start = [int(meta["tokenizer_prompt_start"])] if "tokenizer_prompt_start" in meta else []
    T = config["block_size"]
    for line in open(args.task, encoding="utf-8"):
        if not line.strip():
            continue
        d = json.loads(line)
        if "prompt" in d or isinstance(d.get("question"), str):
            prompt = d["prompt"] if "prompt" in d else "Question: " + d["question"] + "\nAnswer:"
            answer = str(d["answer"])
            output, stopped = greedy(W, config, start + encode(prompt), decoder(meta), args.max_new_tokens,
                            args.stop or ["\n\n", "Question:"])
            pred, label = normalised(output), normalised(answer)
            print(json.dumps({"output": output, "pred": pred, "label": label, "exact_match": int(pred == label),
                              "stopped": stopped}))
            continue
        context, choices, label = item_of(d)
        sums, lengths, cut = [], [], False
        for choice in choices:
            ctx, cont = encode_pair(encode, context, " " + choice)
            ctx = start + ctx
            whole = (ctx + cont)[-(T + 1):]
            cut = cut or len(whole) < len(ctx) + len(cont)
            inp = np.array([whole[:-1]], dtype=np.int64)  # (1, L)
            logits = folio_numpy.forward(W, config, inp)[0, -len(cont):]  # (m, V) float64
            logits = logits - logits.max(-1, keepdims=True)
            logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
            sums.append(float(logp[np.arange(len(cont)), cont].sum()))
            lengths.append(len(cont))
        sums = np.array(sums)
        print(json.dumps({
            "logprobs": sums.tolist(),
            "pred": int(np.argmax(sums)),
            "pred_norm": int(np.argmax(sums / np.array([float(len(c)) for c in choices]))),
            "pred_norm_tokens": int(np.argmax(sums / np.array(lengths, dtype=float))),
            "pred_norm_bytes": int(np.argmax(sums / np.array([float(len(c.encode())) for c in choices]))),
            "label": label,
            "cut": cut,
        }))


if __name__ == "__main__":
    main()
