"""The synthetic engine against a notebook's per-seed loop, on Figure 2's full stack at the paper's settings.

Figure 2 = 8 panels x 5 seeds = 40 models (FAFO a/e/f, FACO b, CAFO c, CACO d/g/h), identity x 1e-6 initialisation,
SGD at 0.01 (QK x10, x5 and ramps), batch 32, one-hot tokens over 58 ids, sequences of 64. Times are per model-step
(one SGD step of one model), one torch thread, measured side by side in one run:

1. literal loop: eq. (1) written out (``models/reference.py``: one-hot X, matmuls) with autograd and
   ``torch.optim.SGD``, one model after another, as a per-seed notebook trains;
2. the same loop with subnormal floats flushed to zero;
3. stacked autograd: the library's batched forward (``models.forward``) with autograd, every model of a
   parameterisation in one stack, denormals flushed;
4. the engine: counts instead of positions, hand-derived backward, in-place SGD, one stack per parameterisation.

Also printed: the floating-point operations of a model-step (the engine's matrix products) and the fraction of this
core's single-thread matmul peak (a 1024 x 1024 sgemm) that the engine reaches.

Profile of the Figure 2 FAFO stack (40 models, one thread), before and after (torch.profiler, self CPU time):
- before (stacked autograd, no flush): ``aten::bmm`` ~80% of the step, ~600 us per 58 x 58 product: subnormal
  floats from the 1e-6 initialisation's products; with the flush the step ran ~5x faster.
- after (engine): the batched matmuls ~37% (six 32 x 58 x 58 products per FAFO step, ~70 us each for 40 models),
  softmax / log-softmax ~9%, the in-place SGD update ~8%, batch gathering ~3%; the rest is elementwise work and
  per-op overhead. A step of the 40-model stack costs ~1.9 ms.

Also printed: the cost of one step against the stack size K. A step costs ~330-490 us at K = 1 (about 45 small torch
ops and their Python glue) and each further model adds ~60-120 us, so a model-step at K = 5 costs ~1.5x what it
costs at K = 15, and ~4x alone. This fixed cost is what the Figure 2 chapter pays in its small stacks ((b) and (c)
have 5 models each) and in the tails of every stack, where few models are left once the others have stopped.
Gathering a batch was ~70-150 us of it (list indexing of the active models, three gathers); ``engine.FixedBatches``
gathers through one flat index and rebuilds the active positions only when models leave: the same batches, bit for
bit, and a step at K <= 5 ~10-15% faster (old against new interleaved in one run, best of 7: FAFO K = 1 312 -> 270
us, K = 5 591 -> 543; CACO K = 1 422 -> 371, K = 5 673 -> 598; no change beyond noise at K = 15).

Also printed: what fresh sequences every step (the official profile's batches, ``engine.FreshBatches``) cost against a
fixed training set. Drawing them was ~2/3 of an official 5-model step (cProfile of panel (e)): ``np.searchsorted``
for the inverse CDF, ``log`` of the zero counts (~20x slower than of the others), the distinct-token mask and counts
(which training does not read) and a gather per model per step. Now the inverse CDF is bucketed
(``data.synthetic.inverse_cdf``: the same integers), the counts' log skips the zeros, training draws only tokens and
labels (``sample_tokens``), and each block of steps is one stacked count set that a step slices: the same batches
bit for bit. Old against new, interleaved in one run, 4000 steps of 5 models: official panel (e) 7.9 -> 3.4 s, panel
(g) (sequences of 128) 10.9 -> 5.4 s (best of 3 and 2); drawing now costs ~170 us a 5-model step against ~490 us
for the step itself on a fixed set. The whole official Figure 2 chapter, before the last of these (tokens and
labels only): 2919 -> 1627 s, every table identical.

Usage: python benchmarks/bench_engine.py [--steps N]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from qkov_lib.data.synthetic import SyntheticConfig
from qkov_lib.engine import FixedBatches, FreshBatches, Member, StackConfig, count_set, flush_denormals, train_stack
from qkov_lib.chapters.fig2_dtap import panels as figure2_panels
from qkov_lib.synthetic_runs import synthetic_data
from qkov_lib.models import AttentionConfig, forward, init_params
from qkov_lib.models.reference import literal_forward
from qkov_lib.optim import RateSchedule, circuit_groups
from qkov_lib.training import FixedSetBatches

SEEDS = [0, 1, 2, 3, 4]
PANELS = figure2_panels(10.0, 20.0, 5.0, 10.0)
LR, RAMP = 0.01, 200_000
SIZES = (1, 2, 5, 10, 15, 20)  # stack sizes of the scaling table


def schedule(panel) -> RateSchedule:
    return RateSchedule(LR, qk_mult=panel.qk_mult, qk_schedule=panel.qk_schedule, ramp_steps=RAMP)


def model_cfg(panel) -> AttentionConfig:
    return AttentionConfig(panel.parameterisation, vocab=58, init="identity", init_scale=1e-6)


def literal_loop(data, steps: int, panels) -> int:
    """Each (panel, seed) alone: literal eq. (1), autograd, torch.optim.SGD with per-group rates."""
    done = 0
    for panel in panels:
        for i, seed in enumerate(SEEDS):
            params = {k: v[0].detach().clone().requires_grad_() for k, v in init_params(model_cfg(panel),
                                                                                          [seed]).items()}
            groups = circuit_groups(params)
            opt = torch.optim.SGD([{"params": [params[n] for n in names], "lr": schedule(panel).rate(g, 0),
                                    "name": g} for g, names in groups.items() if names])
            batches = FixedSetBatches(data.tokens[i:i + 1], data.labels[i:i + 1], [seed], 32)
            for step in range(steps):
                for group in opt.param_groups:
                    group["lr"] = schedule(panel).rate(group["name"], step)
                tokens, labels = batches(step)
                opt.zero_grad()
                logits, _ = literal_forward(params, model_cfg(panel), tokens[0])
                torch.nn.functional.cross_entropy(logits, labels[0]).backward()
                opt.step()
                done += 1
    return done


def stacked_autograd(data, steps: int) -> int:
    """One stack per parameterisation through ``models.forward`` and autograd, plain SGD per model and group."""
    done = 0
    for par in ("FAFO", "FACO", "CAFO", "CACO"):
        panels = [p for p in PANELS if p.parameterisation == par]
        seeds = SEEDS * len(panels)
        cfg = model_cfg(panels[0])
        params = {k: torch.cat([v] * len(panels)).detach().requires_grad_()
                  for k, v in init_params(cfg, SEEDS).items()}
        groups = {n: g for g, names in circuit_groups(params).items() for n in names}
        batches = FixedSetBatches(data.tokens, data.labels, seeds, 32, rows=list(range(5)) * len(panels))
        for step in range(steps):
            tokens, labels = batches(step)
            logits, _ = forward(params, cfg, tokens)
            loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none").mean(1)
            grads = torch.autograd.grad(loss.sum(), list(params.values()))
            with torch.no_grad():
                for (name, p), g in zip(params.items(), grads):
                    lr = torch.tensor([schedule(pn).rate(groups[name], step) for pn in panels for _ in SEEDS])
                    p.sub_(lr.view(-1, 1, 1) * g)
            done += len(seeds)
    return done


def train_one_stack(counts, par: str, panels, seeds, rows, steps: int) -> None:
    """One engine stack of ``par``: model i is ``panels[i]`` with seed ``seeds[i]`` on data row ``rows[i]``."""
    members = [Member(s, r, schedule(p), max_steps=steps) for p, s, r in zip(panels, seeds, rows)]
    base = init_params(model_cfg(panels[0]), SEEDS)
    params = {k: v[torch.tensor([SEEDS.index(s) for s in seeds])] for k, v in base.items()}
    train_stack(params, members, StackConfig.of(par, target_nll=0), FixedBatches(counts, members, 32).take,
                counts.query_ids, progress=False)


def engine(counts, steps: int) -> int:
    """The engine, one stack per parameterisation (as ``synthetic_runs.train_runs`` groups them)."""
    done = 0
    for par in ("FAFO", "FACO", "CAFO", "CACO"):
        panels = [p for p in PANELS if p.parameterisation == par for _ in SEEDS]
        n = len(panels) // len(SEEDS)
        train_one_stack(counts, par, panels, SEEDS * n, list(range(len(SEEDS))) * n, steps)
        done += len(panels) * steps
    return done


def stack_scaling(counts, steps: int, repeats: int = 3) -> dict[str, list[float]]:
    """Microseconds per step of one stack of K models, per parameterisation and K (seeds and rows cycle), the best
    of ``repeats`` runs."""
    table = {}
    for par in ("FAFO", "FACO", "CAFO", "CACO"):
        panel = next(p for p in PANELS if p.parameterisation == par)
        table[par] = []
        for k in SIZES:
            table[par].append(best_us_per_step(lambda: train_one_stack(
                counts, par, [panel] * k, [SEEDS[i % len(SEEDS)] for i in range(k)],
                [i % len(SEEDS) for i in range(k)], steps), steps, repeats))
    return table


def best_us_per_step(run, steps: int, repeats: int) -> float:
    """Microseconds per step of ``run()`` (``steps`` steps), the best of ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) / steps * 1e6)
    return min(times)


def batch_regimes(steps: int, repeats: int = 3) -> tuple[float, float]:
    """Microseconds per step of a 5-model FAFO stack on the authors' task (official layout, sequences of 64 over 50
    ids), its batches from a fixed training set against fresh sequences every step (``FreshBatches``, drawn
    ``eval_every`` = 100 steps at a time, as the official profile trains); the best of ``repeats`` runs each."""
    cfg = SyntheticConfig(layout="official", distinct_weights="linear", vocab_size=50, seq_len=63)
    train, _ = synthetic_data(cfg, SEEDS, 6400, 32)
    counts = count_set(train, cfg.vocab)
    members = [Member(s, r, schedule(PANELS[0]), max_steps=steps) for r, s in enumerate(SEEDS)]
    params = init_params(AttentionConfig("FAFO", vocab=cfg.vocab, init="identity", init_scale=1e-6), SEEDS)
    sources = {"fixed": lambda: FixedBatches(counts, members, 32).take,
               "fresh": lambda: FreshBatches(cfg, members, 32, 100, True, torch.device("cpu")).take}
    sc = StackConfig.of("FAFO", target_nll=0, eval_every=100)
    best = {name: best_us_per_step(lambda: train_stack(params, members, sc, source(), counts.query_ids,
                                                       progress=False), steps, repeats)
            for name, source in sources.items()}
    return best["fixed"], best["fresh"]


def timed(fn, *args) -> float:
    start = time.perf_counter()
    n = fn(*args)
    return (time.perf_counter() - start) / n


def flops_per_model_step() -> float:
    """Matrix products of one engine step, averaged over Figure 2's panels: FAFO/CAFO six B x V x V products
    (forward 2, backward 4), FACO/CACO three; plus the query-column products of the QK circuit."""
    b, v, q = 32, 58, 4
    big = 2 * b * v * v
    per = {"FAFO": 6 * big + 2 * (2 * q * v * v) + 2 * (2 * b * q * v), "CAFO": 6 * big + 2 * (2 * b * q * v),
           "FACO": 3 * big + 2 * (2 * q * v * v) + 2 * (2 * b * q * v), "CACO": 3 * big + 2 * (2 * b * q * v)}
    return float(np.mean([per[p.parameterisation] for p in PANELS]))


def peak_gflops() -> float:
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    return 10 * 2 * 1024 ** 3 / (time.perf_counter() - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400, help="steps per model (the literal loop runs a tenth)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data_cfg = SyntheticConfig()
    data, _ = synthetic_data(data_cfg, SEEDS, 6400, 32)
    counts = count_set(data, data_cfg.vocab)
    literal_panels = PANELS[:4]  # one panel per parameterisation
    rows = [("literal loop (reference.py + torch.optim.SGD)",
             timed(literal_loop, data, args.steps // 10, literal_panels))]
    with flush_denormals():
        rows.append(("literal loop, denormals flushed", timed(literal_loop, data, args.steps // 10, literal_panels)))
        rows.append(("stacked autograd (models.forward), flushed", timed(stacked_autograd, data, args.steps)))
        rows.append(("engine, one stack per parameterisation", timed(engine, counts, args.steps)))
    eng = rows[-1][1]
    print(f"Figure 2 stack, 40 models, {args.steps} steps each (literal loop: one model per parameterisation, "
          f"{args.steps // 10} steps), one torch thread")
    print(f"{'run':48} {'us per model-step':>18} {'engine is x faster':>19}")
    for name, t in rows:
        print(f"{name:48} {t * 1e6:>18.1f} {t / eng:>19.1f}")
    flops, peak = flops_per_model_step(), peak_gflops()
    print(f"engine: {flops / 1e6:.2f} MFLOP per model-step (matrix products) -> {flops / eng / 1e9:.1f} GFLOP/s, "
          f"{100 * flops / eng / 1e9 / peak:.0f}% of this core's sgemm rate ({peak:.0f} GFLOP/s, 1024 x 1024)")
    with flush_denormals():
        scaling = stack_scaling(counts, args.steps)
    print(f"\none stack of K models, {args.steps} steps: us per step (us per model-step)")
    print(f"{'':6}" + "".join(f"{f'K = {k}':>16}" for k in SIZES))
    for par, times in scaling.items():
        print(f"{par:6}" + "".join(f"{t:>8.0f} ({t / k:>4.0f})" for t, k in zip(times, SIZES)))
    with flush_denormals():
        fixed, fresh = batch_regimes(max(100, args.steps // 100 * 100))
    print(f"\nFAFO, 5 models, the authors' task: {fixed:.0f} us per step on a fixed set, {fresh:.0f} us on fresh "
          f"sequences every step ({fresh / fixed:.2f}x: drawing them costs {fresh - fixed:.0f} us a step)")


if __name__ == "__main__":
    main()
