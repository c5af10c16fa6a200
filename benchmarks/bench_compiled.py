"""The compiled engine (``qkov_lib/compiled.py``, numba) against the torch engine, on Figure 2's task at the paper's
settings: 58 tokens, sequences of 64, batch 32, SGD at 0.01 (QK x10), identity x 1e-6 initialisation, subnormals
flushed, one thread. Times are microseconds per model-step (one update of one model) of one stack of K models on a
fixed training set (``FixedBatches``), FAFO and CACO. Both engines run side by side in one process: the repeats
alternate the engines and the best of them counts, timed as this process's CPU time (the cores may be shared).
Also printed: the arithmetic limit (the step's matrix products at the rate of a 1024 x 1024 sgemm timed in the same
run) and the share of that rate each engine reaches.

Measured (2 shared cores of an AMD EPYC, load ~6; sgemm 98 GFLOP/s), us per model-step, torch -> compiled:
FAFO K = 1 161 -> 35, K = 5 62 -> 32, K = 15 44 -> 30, K = 40 45 -> 31 (limit 14: 2.2x);
CACO K = 1 119 -> 21, K = 5 41 -> 18, K = 15 28 -> 17, K = 40 26 -> 17 (limit 6.9: 2.5x).
The compiled step is mostly its B x V x V products (np.dot, OpenBLAS: ~3.1 us each, ~70 GFLOP/s at this size;
six of them are ~19 us of a FAFO step); the rest is the softmaxes, the exp, the query columns and the update,
~6 (CACO) to ~11 us (FAFO). Prefetching the next step's examples (read at random from the count set) saves ~3 us.

Usage: python benchmarks/bench_compiled.py [--steps N] [--repeats R]
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from qkov_lib.data.synthetic import SyntheticConfig
from qkov_lib.backends import ENGINE_ENV, train_stack
from qkov_lib.engine import FixedBatches, Member, StackConfig, count_set, flush_denormals
from qkov_lib.synthetic_runs import synthetic_data
from qkov_lib.models import AttentionConfig, init_params
from qkov_lib.optim import RateSchedule

SEEDS = [0, 1, 2, 3, 4]
SIZES = (1, 5, 15, 40)
PARAMETERISATIONS = ("FAFO", "CACO")
B, V, Q = 32, 58, 4  # batch, tokens (= hidden size and outputs), query tokens


def flops_per_model_step(par: str) -> float:
    """The matrix products of one step (``bench_engine.py``'s count): six (FO) or three (CO) B x V x V products,
    plus the QK circuit's query columns."""
    big = 2 * B * V * V
    qk = 2 * (2 * Q * V * V) + 2 * (2 * B * Q * V) if par.startswith("FA") else 2 * (2 * B * Q * V)
    return (6 if par.endswith("FO") else 3) * big + qk


def sgemm_gflops(repeats: int = 7) -> float:
    """This core's single-thread sgemm rate: a 1024 x 1024 product, the best of ``repeats``."""
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        a @ b
        best = min(best, time.process_time() - start)
    return 2 * 1024 ** 3 / best / 1e9


def stack_seconds(counts, par: str, k: int, steps: int, backend: str) -> float:
    """CPU seconds to train one stack of ``k`` models (seeds and data rows cycle) for ``steps`` steps."""
    members = [Member(SEEDS[i % len(SEEDS)], i % len(SEEDS), RateSchedule(0.01, qk_mult=10.0), max_steps=steps)
               for i in range(k)]
    params = init_params(AttentionConfig(par, vocab=V, init="identity", init_scale=1e-6), [m.seed for m in members])
    params = {name: p.detach() for name, p in params.items()}
    batch = FixedBatches(counts, members, B).take
    os.environ[ENGINE_ENV] = backend
    start = time.process_time()
    train_stack(params, members, StackConfig.of(par, target_nll=0), batch, counts.query_ids, progress=False)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps per model")
    parser.add_argument("--repeats", type=int, default=7, help="alternating repeats per engine (the best counts)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data_cfg = SyntheticConfig()
    data, _ = synthetic_data(data_cfg, SEEDS, 6400, 32)
    counts = count_set(data, data_cfg.vocab)
    with flush_denormals():
        stack_seconds(counts, "FAFO", 1, 1, "compiled")  # compiles the kernels, or loads them from the cache
        peak = sgemm_gflops()
        print(f"one stack of K models, {args.steps} steps, one thread, best of {args.repeats} alternating repeats "
              f"(CPU time); sgemm 1024 x 1024: {peak:.0f} GFLOP/s")
        print(f"{'':5}{'K':>4} {'torch us':>9} {'compiled us':>12} {'limit us':>9} {'compiled/limit':>15} "
              f"{'torch %sgemm':>13} {'compiled %sgemm':>16}")
        ratios = []
        for par in PARAMETERISATIONS:
            limit = flops_per_model_step(par) / (peak * 1e9) * 1e6
            for k in SIZES:
                best = {"torch": float("inf"), "compiled": float("inf")}
                for _ in range(args.repeats):
                    for backend in best:
                        seconds = stack_seconds(counts, par, k, args.steps, backend)
                        best[backend] = min(best[backend], seconds / (k * args.steps) * 1e6)
                print(f"{par:5}{k:>4} {best['torch']:>9.1f} {best['compiled']:>12.1f} {limit:>9.1f} "
                      f"{best['compiled'] / limit:>14.1f}x {100 * limit / best['torch']:>12.0f}% "
                      f"{100 * limit / best['compiled']:>15.0f}%")
                ratios.append((par, k, best["torch"] / best["compiled"]))
    for par, k, ratio in ratios:
        print(f"compiled vs torch engine, K={k}: {ratio:.1f}x ({par})")


if __name__ == "__main__":
    main()
