#!/usr/bin/env python3
"""Exact-answer accuracy of a chat model on held-out prompts, asked through a running
`folio serve`'s /v1/chat/completions (greedy, temperature 0), for docs/chat.md:

    python3 scripts/chat_accuracy.py --url http://127.0.0.1:8080 --prompts heldout.jsonl

PROMPTS is scripts/chat_tasks.py --prompts's output: {"messages": [...], "answer": "..."}
a line. A reply is right when, stripped of surrounding spaces, it equals the answer.
Prints the accuracy per kind of task and overall; exits 1 under --min (a fraction).
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
    args = ap.parse_args()
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
        per.setdefault(k, [0, 0])
        per[k][0] += ok
        per[k][1] += 1
        right += ok
        total += 1
        if not ok:
            wrong.append((item["messages"][-1]["content"], item["answer"], reply))
    for k in sorted(per):
        print(f"{k:9s} {per[k][0]:4d} / {per[k][1]:4d}  {100.0 * per[k][0] / per[k][1]:5.1f} %")
    print(f"all       {right:4d} / {total:4d}  {100.0 * right / total:5.1f} %")
    for prompt, answer, reply in wrong[:args.show]:
        print(f"  wrong: {prompt!r}: {reply!r}, not {answer!r}")
    sys.exit(1 if right < args.min * total else 0)


if __name__ == "__main__":
    main()
