#!/usr/bin/env python3
"""Exact-answer accuracy of a chat model on held-out prompts, asked through a running
`folio serve`'s /v1/chat/completions (greedy, temperature 0), for docs/chat.md:

    python3 scripts/chat_accuracy.py --url http://127.0.0.1:8080 --prompts heldout.jsonl

PROMPTS is scripts/chat_tasks.py --prompts's output: {"messages": [...], "answer": "..."}
a line. A reply is right when, stripped of surrounding spaces, it equals the answer.
Prints the accuracy per kind of task and overall; exits 1 under --min (a fraction).
--train FILE (the fine-tuning conversations) also gives the accuracy on the prompts
that are not a user's message in FILE: held-out prompts are drawn with another seed,
so some (most of the sums, whose operands are 0-99) are in the training file verbatim.
"""
import argparse
import json
import sys
import urllib.request


def kind(prompt):
    for prefix, name in (("Copy", "copy"), ("Reverse", "reverse"), ("Spell", "spell"), ("First", "first"),
                         ("Last", "last")):
        if prompt.startswith(prefix):
            return name
    return "add" if "+" in prompt else "subtract"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--min", type=float, default=0.0, help="exit 1 below this accuracy (0 to 1)")
    ap.add_argument("--show", type=int, default=5, help="print this many wrong replies")
    ap.add_argument("--train", help="the fine-tuning conversations: also score the prompts not in them")
    args = ap.parse_args()
    seen = set()
    for line in open(args.train, encoding="utf-8") if args.train else []:
        seen.update(m["content"] for m in json.loads(line)["messages"] if m["role"] == "user")
    right, total, per = 0, 0, {}
    wrong = []
    for line in open(args.prompts, encoding="utf-8"):
        item = json.loads(line)
        body = json.dumps({"messages": item["messages"], "temperature": 0, "max_tokens": 32}).encode()
        request = urllib.request.Request(args.url + "/v1/chat/completions", body,
                                         {"Content-Type": "application/json"})
        reply = json.load(urllib.request.urlopen(request, timeout=120))["choices"][0]["message"]["content"]
        ok = reply.strip() == item["answer"]
        k = kind(item["messages"][-1]["content"])
        new = item["messages"][-1]["content"] not in seen
        per.setdefault(k, [0, 0, 0, 0])
        per[k][0] += ok
        per[k][1] += 1
        per[k][2] += ok and new
        per[k][3] += new
        right += ok
        total += 1
        if not ok:
            wrong.append((item["messages"][-1]["content"], item["answer"], reply))
    def row(name, r, n, r_new, n_new):
        unseen = f"   not in --train: {r_new:4d} / {n_new:4d}" if args.train else ""
        print(f"{name:9s} {r:4d} / {n:4d}  {100.0 * r / n:5.1f} %{unseen}")

    for k in sorted(per):
        row(k, *per[k])
    row("all", right, total, sum(p[2] for p in per.values()), sum(p[3] for p in per.values()))
    for prompt, answer, reply in wrong[:args.show]:
        print(f"  wrong: {prompt!r}: {reply!r}, not {answer!r}")
    sys.exit(1 if right < args.min * total else 0)


if __name__ == "__main__":
    main()
