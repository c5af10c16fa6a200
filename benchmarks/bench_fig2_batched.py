"""One Figure 2 panel, 5 seeds: trained batched (seeds as a tensor dimension) against sequentially, same steps.

Sequential baselines, each seed on its own: (1) eq. (1) written literally (one-hot X, matmuls) with torch.optim.SGD,
the way a per-seed notebook trains; (2) the library's own training code called with one seed at a time. All three
see the same mini-batches; the script checks they end at the same parameters and prints times side by side.
Usage: python benchmarks/bench_fig2_batched.py [--steps N] [--panel FAFO]
"""
from __future__ import annotations

import argparse
import time

import torch

from qkov_lib.data.synthetic import SyntheticConfig
from qkov_lib.experiments import synthetic_data
from qkov_lib.models import AttentionConfig, init_params
from qkov_lib.models.reference import literal_forward
from qkov_lib.optim import RateSchedule, circuit_groups
from qkov_lib.training import FixedSetBatches, TrainConfig, attention_loss, evaluate, train

SEEDS = [0, 1, 2, 3, 4]


def run_library(cfg, tc, data, seeds):
    params = init_params(cfg, seeds)
    monitor = lambda prm: evaluate(prm, cfg, data.tokens, data.labels)["nll"].mean(1)  # noqa: E731
    train(params, attention_loss(cfg), tc, FixedSetBatches(data.tokens, data.labels, seeds, tc.batch_size), monitor,
          seeds, progress=False)
    return params


def run_literal(cfg, tc, data, seed, index):
    start = init_params(cfg, [seed])
    params = {k: v[0].detach().clone().requires_grad_() for k, v in start.items()}
    groups = circuit_groups(params)
    opt = torch.optim.SGD([{"params": [params[n] for n in names], "lr": tc.schedule.rate(g, 0)}
                           for g, names in groups.items() if names])
    batches = FixedSetBatches(data.tokens[index:index + 1], data.labels[index:index + 1], [seed], tc.batch_size)
    for step in range(tc.max_steps):
        tokens, labels = batches(step)
        opt.zero_grad()
        logits, _ = literal_forward(params, cfg, tokens[0])
        torch.nn.functional.cross_entropy(logits, labels[0]).backward()
        opt.step()
    return params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--panel", default="FAFO")
    args = parser.parse_args()
    torch.set_num_threads(2)
    data_cfg = SyntheticConfig()
    data, _ = synthetic_data(data_cfg, SEEDS, 6400, 32)
    cfg = AttentionConfig(args.panel, vocab=data_cfg.vocab, init="identity", init_scale=1e-6)
    cfg_seq = AttentionConfig(args.panel, vocab=data_cfg.vocab, init="identity", init_scale=1e-6)
    tc = TrainConfig(RateSchedule(lr=0.1, qk_mult=10.0), target_nll=1e-12, max_steps=args.steps,
                     eval_every=args.steps)

    t0 = time.perf_counter()
    batched = run_library(cfg, tc, data, SEEDS)
    t_batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    one_by_one = [run_library(cfg_seq, tc, data.apply(lambda t, i=i: t[i:i + 1]), [s]) for i, s in enumerate(SEEDS)]
    t_loop = time.perf_counter() - t0
    t0 = time.perf_counter()
    literal = [run_literal(cfg_seq, tc, data, s, i) for i, s in enumerate(SEEDS)]
    t_literal = time.perf_counter() - t0

    def gap(other, take):
        return max((batched[k][i] - take(other[i], k)).abs().max().item() / batched[k][i].abs().max().item()
                   for i in range(len(SEEDS)) for k in batched)

    print(f"panel {args.panel} (QK x10, lr 0.1), {len(SEEDS)} seeds x {args.steps} SGD steps of batch 32")
    print(f"{'run':46} {'time':>9} {'vs batched':>11} {'max rel. param gap':>19}")
    print(f"{'batched (seeds as a dimension)':46} {t_batched:8.2f}s {1:>10.1f}x {0:>19.1e}")
    print(f"{'sequential, library code, one seed at a time':46} {t_loop:8.2f}s {t_loop / t_batched:>10.1f}x "
          f"{gap(one_by_one, lambda p, k: p[k][0]):>19.1e}")
    print(f"{'sequential, literal eq. (1) + torch.optim.SGD':46} {t_literal:8.2f}s {t_literal / t_batched:>10.1f}x "
          f"{gap(literal, lambda p, k: p[k]):>19.1e}")


if __name__ == "__main__":
    main()
