#!/usr/bin/env python3
"""The scaling model of docs/scaling.md: step time and efficiency of folio's data
parallelism against the number of ranks N, from parameter counts, one rank's measured
step time and the link's bandwidth. Prints the tables the document shows.

    python3 scripts/scaling-model.py [M_STEP_SECONDS] [S_STEP_SECONDS]

M_STEP_SECONDS, S_STEP_SECONDS: one rank's (one thread's) step at configs M and S on
the node in question (defaults: this repository's 2-core machine, docs/scaling.md).
The ~100M config's step is M's scaled by its FLOPs (6 x params + 12 x layers x T x C a
token, DESIGN.md)."""
import sys

ALPHA = 50e-6     # seconds: one message's latency over TCP in a rack (the ring pays 2(N-1) of them)
BUCKET = 4 << 20  # bytes: folio's gradient bucket (train/gradient_buckets.h)
BACKWARD = 2 / 3  # the share of a step that is backward: the window overlap can hide comm in


def params(L, C, T, V=65):
    """folio's GPT with biases: per block qkv 3C^2, projection C^2 + C, feed-forward
    8C^2 + 5C, two LayerNorms 4C; token and position tables, final LayerNorm, head."""
    return L * (12 * C * C + 10 * C) + V * C + T * C + 2 * C + V * C + V


def flops(L, C, T, B):
    return B * T * (6 * params(L, C, T) + 12 * L * T * C)


CONFIGS = {  # name: (layers, n_embd, block, batch)
    "S": (4, 128, 64, 12),
    "M": (6, 384, 256, 64),
    "100M": (14, 768, 1024, 64),
}


def allreduce_seconds(n, nbytes, gbit):
    """Ring all-reduce: each rank sends and receives 2(N-1)/N of the buffer."""
    if n == 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes * 8 / (gbit * 1e9) + 2 * (n - 1) * ALPHA


def step(t1, n, nbytes, gbit, overlap=True, accum=1):
    """Seconds per optimizer step on N ranks for a global batch of accum x batch:
    compute splits N ways; the all-reduce runs once, hidden behind the last
    micro-batch's backward except its last bucket (which starts when backward ends)."""
    compute = accum * t1 / n
    comm = allreduce_seconds(n, nbytes, gbit)
    if not overlap:
        return compute + comm, comm
    last = allreduce_seconds(n, min(BUCKET, nbytes), gbit)
    exposed = max(comm - BACKWARD * t1 / n, last) if n > 1 else 0.0
    return compute + exposed, exposed


def main():
    m_step = float(sys.argv[1]) if len(sys.argv) > 1 else 7.0
    s_step = float(sys.argv[2]) if len(sys.argv) > 2 else 0.030
    m = CONFIGS["M"]
    t1 = {"S": s_step, "M": m_step, "100M": m_step * flops(*CONFIGS["100M"]) / flops(*m)}
    print("config  params       bytes/step at N=2 (N->inf: x2)   one rank's step")
    for name, (L, C, T, B) in CONFIGS.items():
        p = params(L, C, T)
        print(f"{name:6} {p:>11,}  {4 * p / 1e6:8.1f} MB                       {t1[name]:8.3f} s")
    ns = [1, 2, 4, 8, 16, 32, 64]
    for gbit in (1, 10, 100):
        print(f"\n{gbit} Gbit/s: step seconds (efficiency), overlap on | off")
        print("config  " + "".join(f"{'N=' + str(n):>22}" for n in ns))
        for name, (L, C, T, B) in CONFIGS.items():
            nbytes = 4 * params(L, C, T)
            cells = []
            for n in ns:
                if n > B:  # folio gives every rank at least one sequence of the batch
                    cells.append("-")
                    continue
                on, _ = step(t1[name], n, nbytes, gbit)
                off, _ = step(t1[name], n, nbytes, gbit, overlap=False)
                cells.append(f"{on:6.3g} ({t1[name] / n / on:4.0%}) |{t1[name] / n / off:4.0%}")
            print(f"{name:6}  " + "".join(f"{c:>22}" for c in cells))
    print("\nlargest N with efficiency >= 90 % (overlap on; N up to the batch size), and with --grad-accum 4 / 16")
    for gbit in (1, 10, 100):
        row = []
        for name, (L, C, T, B) in CONFIGS.items():
            nbytes = 4 * params(L, C, T)
            best = []
            for k in (1, 4, 16):
                ok = [n for n in range(1, B + 1) if k * t1[name] / n / step(t1[name], n, nbytes, gbit, accum=k)[0] >= 0.9]
                best.append(str(max(ok)) if ok else "-")
            row.append(f"{name} {'/'.join(best)}")
        print(f"{gbit:>3} Gbit/s:  " + ",  ".join(row))


if __name__ == "__main__":
    main()
