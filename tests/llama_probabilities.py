#!/usr/bin/env python3
"""llama.cpp's next-token probabilities held to folio's, for the tests that run a GGUF
written by llama.cpp's own gguf-py (test_gguf_elsewhere.sh, test_hf_gpt2_ggufpy.sh).

Along llama.cpp's greedy continuation of each prompt, folio's distributions
(scripts/folio_numpy.py on the run, one forward pass a prompt) must be within 2e-3 of
llama.cpp's, over the whole vocabulary; and llama.cpp's tokenization of each prompt
must be folio's. LLAMA is what the test's node script wrote: one model's result
(hf_gpt2_ggufpy.mjs) or a list of them of which the first is used (gguf_llamacpp.mjs);
PROMPTS likewise, a list of {"ids": ...} or a list of jobs whose first holds "prompts".

    llama_probabilities.py RUN LLAMA PROMPTS --arch gpt2 --n-vocab 50257 [--probs FILE]
        [--bos] [--config KEY=VALUE]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import folio_numpy  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="folio's run directory")
    ap.add_argument("llama", help="the node script's JSON: arch, n_vocab, runs (tokenized, ids, probs)")
    ap.add_argument("prompts", help="the prompts' ids as folio tokenized them")
    ap.add_argument("--arch", required=True, help="the architecture llama.cpp must report")
    ap.add_argument("--n-vocab", type=int, required=True, help="the vocabulary size llama.cpp must report")
    ap.add_argument("--probs", help="llama.cpp's probabilities as float32 (prompts, steps, n_vocab), when not "
                    "in LLAMA's runs")
    ap.add_argument("--bos", action="store_true", help="each prompt's ids start with the BOS the file asks for, "
                    "which llama.cpp's tokenization of the prompt leaves out")
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="a value the run's config must hold, as folio_numpy reads it (JSON)")
    args = ap.parse_args()

    W, config, _ = folio_numpy.load(args.run)
    for pair in args.config:
        key, value = pair.split("=", 1)
        assert config.get(key) == json.loads(value), (key, config.get(key))
    llama = json.load(open(args.llama))
    llama = llama[0] if isinstance(llama, list) else llama
    prompts = json.load(open(args.prompts))
    prompts = [p["ids"] for p in (prompts[0]["prompts"] if "prompts" in prompts[0] else prompts)]
    assert llama["arch"] == args.arch and llama["n_vocab"] == args.n_vocab, (llama["arch"], llama["n_vocab"])
    theirs = (np.fromfile(args.probs, "<f4").reshape(len(prompts), -1, args.n_vocab) if args.probs
              else [np.array(run["probs"]) for run in llama["runs"]])
    worst = 0.0
    for p, (prompt, run) in enumerate(zip(prompts, llama["runs"])):
        typed = prompt[1:] if args.bos else prompt
        assert run["tokenized"] == typed, f"prompt {p}: llama.cpp tokenizes it {run['tokenized']}, folio {typed}"
        ids = prompt + run["ids"]
        # folio's next-token distributions along llama.cpp's continuation, one forward pass.
        logits = folio_numpy.forward(W, config, np.array([ids[:-1]]))[0, len(prompt) - 1:]
        ours = np.exp(logits - logits.max(-1, keepdims=True))
        ours /= ours.sum(-1, keepdims=True)
        gap = float(abs(ours - theirs[p]).max())
        worst = max(worst, gap)
        print(f"prompt {p}: {len(run['ids'])} steps, largest probability difference {gap:.2e}, "
              f"mean top probability {float(ours.max(-1).mean()):.3f}")
    assert worst <= 2e-3, f"llama.cpp's probabilities differ from folio's by {worst:.3g}"
    print("llama.cpp's tokenization of the prompts and its probabilities (within 2e-3) are folio's")


if __name__ == "__main__":
    main()
