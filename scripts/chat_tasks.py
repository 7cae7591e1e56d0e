#!/usr/bin/env python3
"""Writes conversations of small tasks whose answers can be checked, in OpenAI's
fine-tuning format (one {"messages": [...]} a line), for folio's chat fine-tuning
example (docs/chat.md):

    copy      "Copy: lamp"                  -> "lamp"
    reverse   "Reverse: lamp"               -> "pmal"
    spell     "Spell: lamp"                 -> "l-a-m-p"
    add       "What is 27 + 15?"            -> "42"
    subtract  "What is 27 - 15?"            -> "12"
    first     "First item of: fig, oak, ash" -> "fig"
    last      "Last item of: fig, oak, ash"  -> "ash"

    python3 scripts/chat_tasks.py --count 20000 --seed 1 > train.jsonl
    python3 scripts/chat_tasks.py --count 200 --seed 2 --prompts > heldout.jsonl

--weights add=3,subtract=3 draws those kinds three times as often as each other kind
(every kind: 1 unless given), for a training mix; without it every kind is as likely,
and a seed writes what it always wrote.

--text writes the tasks as plain text instead ("Q: Copy: lamp\nA: lamp\n\n"), for a base
model's pretraining beside other text (it also gives a character vocabulary its digits).
--prompts writes {"messages": [the user's turn], "answer": "..."} instead: the held-out
prompts that scripts/chat_accuracy.py asks through /v1/chat/completions. A seed's
words are drawn from the same letters, so held-out prompts are new strings, not new
kinds of task. Some conversations carry a system message, and some two exchanges; one
whose ChatML text would pass --max-chars characters is drawn again, so that every
conversation fits a character model's context of that many tokens.
"""
import argparse
import json
import random

LETTERS = "abcdefghijklmnopqrstuvwxyz"
SYSTEMS = ["You are a helpful assistant.", "Answer briefly."]


def word(rng):
    return "".join(rng.choice(LETTERS) for _ in range(rng.randint(2, 7)))


KINDS = ["copy", "reverse", "spell", "add", "subtract", "first", "last"]


def parse_weights(text):
    """"add=3,subtract=3" -> a weight for each kind (1 unless given)."""
    weights = dict.fromkeys(KINDS, 1.0)
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        if name not in weights:
            raise ValueError(f"--weights: unknown kind {name!r}; the kinds are {', '.join(KINDS)}")
        try:
            weights[name] = float(value)
        except ValueError:
            raise ValueError(f"--weights: {part!r} is not KIND=NUMBER") from None
        if weights[name] < 0:
            raise ValueError(f"--weights: {part!r} is negative")
    if not sum(weights.values()) > 0:
        raise ValueError("--weights: every kind has weight 0")
    return weights


def task(rng, weights=None):
    # Without weights, one rng.choice as before: a seed's prompts stay the same.
    kind = rng.choices(KINDS, [weights[k] for k in KINDS])[0] if weights else rng.choice(KINDS)
    if kind in ("copy", "reverse", "spell"):
        w = word(rng)
        prompt = {"copy": "Copy: ", "reverse": "Reverse: ", "spell": "Spell: "}[kind] + w
        answer = {"copy": w, "reverse": w[::-1], "spell": "-".join(w)}[kind]
    elif kind in ("add", "subtract"):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        if kind == "subtract" and b > a:
            a, b = b, a
        prompt = f"What is {a} {'+' if kind == 'add' else '-'} {b}?"
        answer = str(a + b if kind == "add" else a - b)
    else:
        items = [word(rng) for _ in range(rng.randint(2, 4))]
        prompt = f"{'First' if kind == 'first' else 'Last'} item of: {', '.join(items)}"
        answer = items[0] if kind == "first" else items[-1]
    return prompt, answer


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prompts", action="store_true", help="held-out prompts with their answers")
    ap.add_argument("--text", action="store_true", help="the tasks as plain text, for pretraining")
    ap.add_argument("--max-chars", type=int, default=120, help="the longest conversation, as ChatML text")
    ap.add_argument("--weights", default="", help="how often each kind is drawn, e.g. add=3,subtract=3 (others 1)")
    args = ap.parse_args()
    try:
        weights = parse_weights(args.weights) if args.weights else None
    except ValueError as e:
        ap.error(str(e))
    rng = random.Random(args.seed)
    for _ in range(args.count):
        messages = []
        if rng.random() < 0.3:
            messages.append({"role": "system", "content": rng.choice(SYSTEMS)})
        if args.text:
            prompt, answer = task(rng, weights)
            print(f"Q: {prompt}\nA: {answer}\n")
            continue
        if args.prompts:
            prompt, answer = task(rng, weights)
            messages.append({"role": "user", "content": prompt})
            print(json.dumps({"messages": messages, "answer": answer}))
            continue
        while True:
            turns = []
            for _ in range(2 if rng.random() < 0.2 else 1):
                prompt, answer = task(rng, weights)
                turns += [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
            # <|im_start|>role\ncontent<|im_end|>\n: 3 characters and the two markers' 2 tokens
            if sum(len(m["role"]) + len(m["content"]) + 5 for m in messages + turns) <= args.max_chars:
                break
        print(json.dumps({"messages": messages + turns}))


if __name__ == "__main__":
    main()
