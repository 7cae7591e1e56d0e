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


def task(rng):
    kind = rng.choice(["copy", "reverse", "spell", "add", "subtract", "first", "last"])
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
    args = ap.parse_args()
    rng = random.Random(args.seed)
    for _ in range(args.count):
        messages = []
        if rng.random() < 0.3:
            messages.append({"role": "system", "content": rng.choice(SYSTEMS)})
        if args.text:
            prompt, answer = task(rng)
            print(f"Q: {prompt}\nA: {answer}\n")
            continue
        if args.prompts:
            prompt, answer = task(rng)
            messages.append({"role": "user", "content": prompt})
            print(json.dumps({"messages": messages, "answer": answer}))
            continue
        while True:
            turns = []
            for _ in range(2 if rng.random() < 0.2 else 1):
                prompt, answer = task(rng)
                turns += [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
            # <|im_start|>role\ncontent<|im_end|>\n: 3 characters and the two markers' 2 tokens
            if sum(len(m["role"]) + len(m["content"]) + 5 for m in messages + turns) <= args.max_chars:
                break
        print(json.dumps({"messages": messages + turns}))


if __name__ == "__main__":
    main()
