"""GPU readiness, in one run of at most 8 minutes on a machine with CUDA: the book's CUDA path checked against the CPU
and timed. Without CUDA it refuses (exit status 2) unless ``--cpu-only``, which runs parts 1-3 with the CPU in the
GPU's place in a few seconds (the code's own check: there the candidate is the compiled engine, the one the book
trains with on a CPU).

1. **Figure 2's stack, CPU against CUDA.** Figure 2's eight panels (their QK multipliers and ramps) x 2 seeds, one
   stack per parameterisation, 1000 SGD steps at rate 0.1 from a balanced start of scale 0.3 (a start that moves
   at once; the paper's 1e-6 identity start lingers near a saddle, where float32 rounding of any two devices
   decides when each model leaves it): the torch engine on the CPU, the reference, against the engine the book
   uses on the device. Passes if both stop the same models at the same steps, every parameter is within
   ``STACK_TOL`` = 1e-4 of how far it moved (the CPU engines agree within 1e-5: ``tests/unit/train/test_compiled.py``), and the
   loss curves within a relative 1e-3.
2. **One real-data training step, CPU against CUDA.** The HateXplain classifier at the `default` profile's shapes
   (one layer, d_model 64, 4 heads, MLP, 5 seeds, batch 32, 64 tokens; random ids over 2000 tokens), one step of
   the chapter's fused AdamW with the QK rate x30 from the same start and batch: passes if the loss agrees to a
   relative ``LOSS_TOL`` = 1e-5 and every parameter's update to ``STEP_TOL`` = 1e-3 of the largest update of that
   tensor (AdamW's first update is +-lr wherever the gradient is not tiny). Matrix products in
   float32 (TF32 off, torch's default).
3. **The step time of the `paper` profile's Figure 2 stack** on the device: its 40 models (8 panels x 5 seeds, the
   paper's identity x 1e-6 start, SGD at 0.01, 58 tokens), one stack per parameterisation, ``--steps`` steps each
   (synchronised): ms per step of each stack, of all four, and us per model-step; with what 700 000 steps (the
   `paper` profile's step cap) would take at that rate.
4. **The smoke book on CUDA**: every chapter that trains on the device (``DEVICE_CHAPTERS``; ``--all-chapters``
   adds the CPU-only theory chapters) run by the runner at the quick `smoke` profile with QKOV_DEVICE=cuda on the
   tests' fake datasets (``tests/fake_data.py``) into ``--out``; passes if the runner reports no failure and every
   chapter's metadata says it ran on cuda. ``--render`` also builds the HTML book of what ran.

Parts 1-3 take about a minute; part 4 gets what is left of ``--budget-minutes`` (default 8) less a minute.

Usage: python benchmarks/device_check.py [--cpu-only] [--out DIR] [--steps N] [--budget-minutes M]
           [--all-chapters] [--render] [--skip-book]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from qkov_lib.chapters import fig2_dtap  # noqa: E402
from qkov_lib.core.contents import chapter_names  # noqa: E402
from qkov_lib.core.device import ENGINE_ENV, engine_backend  # noqa: E402
from qkov_lib.data.synthetic import SyntheticConfig  # noqa: E402
from qkov_lib.models import AttentionConfig, init_params  # noqa: E402
from qkov_lib.models.transformer import classify, init_classifier, trim  # noqa: E402
from qkov_lib.runner.catalog import resolve  # noqa: E402
from qkov_lib.runs.synthetic_runs import SyntheticSetup, synthetic_data  # noqa: E402
from qkov_lib.train.backends import train_stack  # noqa: E402
from qkov_lib.train.counts import count_set, FixedBatches  # noqa: E402
from qkov_lib.train.stack import Member, StackConfig  # noqa: E402
from qkov_lib.train.stack_optim import flush_denormals  # noqa: E402
from qkov_lib.train.training import train  # noqa: E402

STACK_TOL = 1e-4  # a parameter's CPU/CUDA difference, as a fraction of how far it moved (1000 SGD steps)
CURVE_TOL = 1e-3  # the loss curves' relative difference
LOSS_TOL = 1e-5  # the real-data loss before the step, relative
STEP_TOL = 1e-3  # a parameter's update after one AdamW step, as a fraction of the tensor's largest update
DEVICE_CHAPTERS = (
    "fig2_dtap",
    "fig3_incentive",
    "corollaries",
    "atlas",
    "hatexplain",
    "hatexplain_layers",
    "sva",
    "squad",
)
PARAMETERISATIONS = ("FAFO", "FACO", "CAFO", "CACO")
CPU = torch.device("cpu")


def with_engine(backend: str | None, fn: Callable[[], object]) -> object:
    """``fn()`` with QKOV_ENGINE set to ``backend`` (None: unset, the device's own engine), restored after."""
    before = os.environ.pop(ENGINE_ENV, None)
    if backend:
        os.environ[ENGINE_ENV] = backend
    try:
        return fn()
    finally:
        os.environ.pop(ENGINE_ENV, None)
        if before is not None:
            os.environ[ENGINE_ENV] = before


# --- 1. Figure 2's stack ------------------------------------------------------------------------------------------


def figure2_stacks(
    device: torch.device,
    seeds: list[int],
    steps: int,
    lr: float,
    init: str,
    scale: float,
    vocab_cfg: SyntheticConfig,
    n_train: int,
    target_nll: float = 0.0,
):
    """Figure 2's panels x ``seeds`` on ``device``, one stack per parameterisation: per parameterisation, its
    starting parameters (on the CPU), members, stack config, batch source and query ids."""
    data = synthetic_data(vocab_cfg, seeds, n_train, 32)[0]
    counts = count_set(data.apply(lambda t: t.to(device)), vocab_cfg.vocab)
    eight = fig2_dtap.panels(
        SyntheticSetup(lr=lr, ramp_steps=max(1, steps // 2), max_steps=steps), 10.0, 20.0, 5.0, 10.0
    )
    out = {}
    for par in PARAMETERISATIONS:
        panels = [p for p in eight if p.parameterisation == par]
        members = [Member(s, j, p) for p in panels for j, s in enumerate(seeds)]
        cfg = AttentionConfig(par, vocab=vocab_cfg.vocab, init=init, init_scale=scale)
        base = init_params(cfg, seeds)
        start = {k: torch.cat([v.detach()] * len(panels)) for k, v in base.items()}
        sc = StackConfig.of(par, target_nll=target_nll, eval_every=100)
        out[par] = (start, members, sc, counts)
    return out


def train_on(device: torch.device, start, members, sc, counts, backend: str | None):
    """One stack trained on ``device`` from ``start`` (a copy each time): the engine's result, and each model's
    parameters on the CPU."""
    params = {k: v.clone().to(device) for k, v in start.items()}
    batch = FixedBatches(counts, members, sc.batch_size).take
    with flush_denormals(device.type == "cpu"):
        result = with_engine(backend, lambda: train_stack(params, members, sc, batch, counts.query_ids, progress=False))
    return result, [{k: v.detach().cpu() for k, v in p.items()} for p in result.params]


def worst_difference(start, ref: list[dict], other: list[dict]) -> float:
    """The largest difference of a parameter between two runs (each model's parameters), as a fraction of how far
    it moved in ``ref``."""
    worst = 0.0
    for k, (a, b) in enumerate(zip(ref, other)):
        for name in a:
            moved = (a[name].double() - start[name][k].double()).abs().max().item()
            worst = max(worst, (a[name].double() - b[name].double()).abs().max().item() / max(moved, 1e-30))
    return worst


def stack_agreement(device: torch.device, steps: int) -> tuple[bool, str]:
    """Part 1: the torch engine on the CPU against the device's own engine, every parameterisation."""
    cfg = SyntheticConfig()
    worst, curves, same_stops = 0.0, 0.0, True
    counts_cpu = count_set(synthetic_data(cfg, [0, 1], 512, 32)[0], cfg.vocab)
    for par, (start, members, sc, counts_dev) in figure2_stacks(
        device, [0, 1], steps, 0.1, "balanced", 0.3, cfg, 512
    ).items():
        ref, ref_params = train_on(CPU, start, members, sc, counts_cpu, "torch")
        got, got_params = train_on(device, start, members, sc, counts_dev, None)
        same_stops &= bool(
            np.array_equal(ref.stopped_at, got.stopped_at) and np.array_equal(ref.steps_run, got.steps_run)
        )
        worst = max(worst, worst_difference(start, ref_params, got_params))
        for a, b in zip(ref.curves, got.curves):
            va, vb = np.array([v for _, v in a]), np.array([v for _, v in b])
            curves = max(curves, float(np.max(np.abs(va - vb) / np.maximum(np.abs(va), 1e-12))))
    ok = same_stops and worst <= STACK_TOL and curves <= CURVE_TOL
    engine = engine_backend(device)
    return ok, (
        f"torch engine on cpu vs {engine} engine on {device.type}, {steps} steps x 4 stacks: worst parameter "
        f"difference {worst:.2e} of its movement (tolerance {STACK_TOL:g}), loss curves {curves:.2e} "
        f"(tolerance {CURVE_TOL:g}), same stops and steps: {same_stops}"
    )


# --- 2. one real-data training step ------------------------------------------------------------------------------


def real_step(
    device: torch.device, start: dict[str, torch.Tensor], ids: torch.Tensor, labels: torch.Tensor, setup, cfg
) -> tuple[float, dict[str, torch.Tensor]]:
    """One training step of the classifier on ``device``: (the loss before it, the parameters after it, on the CPU)."""
    params = {k: v.clone().to(device).requires_grad_() for k, v in start.items()}
    x, y = ids.to(device), labels.to(device)
    seeds = list(setup.seeds)

    def loss_fn(prm, xs, ys):
        logits, _ = classify(prm, cfg, trim(xs)[0])
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), ys, reduction="none").mean(1)

    with torch.no_grad():
        before = float(loss_fn(params, x, y).sum())
    one_step = replace(setup.train_config(setup.qk_mult, 1), max_steps=1, eval_every=1)
    train(params, loss_fn, one_step, lambda step: (x, y), lambda prm: np.zeros(len(seeds)), seeds, progress=False)
    return before, {k: v.detach().cpu() for k, v in params.items()}


def real_data_agreement(device: torch.device) -> tuple[bool, str]:
    """Part 2: one AdamW step of the HateXplain classifier at the default shapes on the CPU and on ``device``."""
    setup = resolve("hatexplain", "default")[1]
    cfg = setup.model(2000, 3)
    gen = torch.Generator().manual_seed(0)
    shape = (len(setup.seeds), setup.batch_size, setup.max_len)
    ids = torch.randint(1, 2000, shape, generator=gen)
    lengths = torch.randint(8, setup.max_len + 1, shape[:-1], generator=gen)
    ids[torch.arange(setup.max_len) >= lengths[..., None]] = 0
    labels = torch.randint(0, 3, shape[:-1], generator=gen)
    start = {k: v.detach() for k, v in init_classifier(cfg, list(setup.seeds)).items()}
    torch.backends.cuda.matmul.allow_tf32 = False
    loss_cpu, after_cpu = real_step(CPU, start, ids, labels, setup, cfg)
    loss_dev, after_dev = real_step(device, start, ids, labels, setup, cfg)
    loss_gap = abs(loss_dev - loss_cpu) / abs(loss_cpu)
    step_gap = max(
        float((after_dev[k] - after_cpu[k]).abs().max() / max(float((after_cpu[k] - start[k]).abs().max()), 1e-30))
        for k in start
    )
    ok = loss_gap <= LOSS_TOL and step_gap <= STEP_TOL
    return ok, (
        f"cpu vs {device.type}: loss {loss_cpu:.6f} vs {loss_dev:.6f} (relative {loss_gap:.1e}, tolerance "
        f"{LOSS_TOL:g}); updates differ by at most {step_gap:.1e} of a tensor's largest update (tolerance "
        f"{STEP_TOL:g})"
    )


# --- 3. the paper profile's Figure 2 stack, timed ------------------------------------------------------------------


def step_time(device: torch.device, steps: int) -> tuple[bool, str]:
    """Part 3: ms per step of each of the paper profile's four Figure 2 stacks on ``device``."""
    setup = resolve("fig2_dtap", "paper")[1]
    seeds = list(setup.seeds)
    stacks = figure2_stacks(device, seeds, steps, setup.lr, setup.init, setup.init_scale, setup.data, setup.n_train)
    parts, total, models = [], 0.0, 0
    for par, (start, members, sc, counts) in stacks.items():
        train_on(device, start, members, sc, counts, None)  # warm-up: kernels, caches, compilation
        if device.type == "cuda":
            torch.cuda.synchronize()
        begin = time.perf_counter()
        train_on(device, start, members, sc, counts, None)
        if device.type == "cuda":
            torch.cuda.synchronize()
        ms = (time.perf_counter() - begin) / steps * 1e3
        parts.append(f"{par} ({len(members)} models) {ms:.2f} ms")
        total += ms
        models += len(members)
    cap = setup.max_steps
    return True, (
        f"{engine_backend(device)} engine on {device.type}, {steps} steps: "
        + ", ".join(parts)
        + f"; all four {total:.2f} ms a step, {1e3 * total / models:.1f} us per model-step; "
        f"{cap:,} steps (the step cap) would take {total * cap / 3.6e6:.2f} h"
    )


# --- 4. the smoke book on CUDA -------------------------------------------------------------------------------------


def smoke_book(out: Path, chapters: tuple[str, ...], seconds: float, render: bool) -> tuple[bool, str]:
    """Part 4: the runner at the smoke profile on CUDA, the tests' fake data, into ``out``; every chapter's
    metadata must say cuda."""
    sys.path.insert(0, str(REPO / "tests"))
    from fake_data import write_all_offline  # the tests' fixtures: tiny datasets in the offline layout

    env = dict(
        os.environ,
        QKOV_DEVICE="cuda",
        QKOV_DATA_DIR=str(write_all_offline(out / "data")),
        PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    )
    command = [
        sys.executable,
        "-m",
        "qkov_lib",
        "reproduce",
        "--profile",
        "smoke",
        "--force",
        "--only",
        ",".join(chapters),
        "--out",
        str(out / "chapters"),
        "--results",
        str(out / "results"),
    ]
    began = time.perf_counter()
    try:
        with open(out / "smoke.log", "w") as log:
            status = subprocess.run(
                command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=seconds
            ).returncode
    except subprocess.TimeoutExpired:
        return False, f"the smoke run passed its {seconds:.0f} s; see {out / 'smoke.log'}"
    devices = {}
    for chapter in chapters:
        meta = out / "results" / "smoke" / f"{chapter}.json"
        devices[chapter] = json.loads(meta.read_text()).get("device") if meta.exists() else "no results"
    off = {c: d for c, d in devices.items() if d != "cuda"}
    ok = status == 0 and not off
    text = (
        f"{len(chapters)} chapters in {time.perf_counter() - began:.0f} s, runner exit status {status}; "
        + ("every chapter ran on cuda" if not off else f"not on cuda: {off}")
        + f"; log {out / 'smoke.log'}"
    )
    if render and ok:
        built = subprocess.run(
            [sys.executable, "-m", "qkov_lib", "book", "--no-strict"], cwd=REPO, env=env, capture_output=True, text=True
        )
        text += f"; book build exit status {built.returncode}"
        ok &= built.returncode == 0
    return ok, text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-only", action="store_true", help="no CUDA: parts 1-3 with the CPU in its place")
    parser.add_argument("--out", type=Path, help="where the smoke run writes (default: a temporary folder)")
    parser.add_argument("--steps", type=int, default=None, help="steps of part 3 (default 2000; 50 with --cpu-only)")
    parser.add_argument("--budget-minutes", type=float, default=8.0, help="the whole run's limit (default 8)")
    parser.add_argument(
        "--all-chapters", action="store_true", help="part 4 runs every chapter, not only those on the device"
    )
    parser.add_argument("--render", action="store_true", help="part 4 also builds the HTML book")
    parser.add_argument("--skip-book", action="store_true", help="parts 1-3 only")
    args = parser.parse_args()
    began = time.perf_counter()
    if args.cpu_only:
        device = CPU
    elif not torch.cuda.is_available():
        print(
            "device_check: no CUDA device here (torch.cuda.is_available() is False, torch "
            f"{torch.__version__}); this check is for a machine with an NVIDIA GPU. Run it there, or run "
            "`python benchmarks/device_check.py --cpu-only` to check its CPU parts.",
            file=sys.stderr,
        )
        sys.exit(2)
    else:
        device = torch.device("cuda")
        print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    torch.set_num_threads(1)
    steps = args.steps or (50 if args.cpu_only else 2000)
    parts: list[tuple[str, Callable[[], tuple[bool, str]]]] = [
        ("1. Figure 2 stack, cpu vs device", lambda: stack_agreement(device, 300 if args.cpu_only else 1000)),
        ("2. one real-data step, cpu vs device", lambda: real_data_agreement(device)),
        ("3. paper profile's Figure 2 stack, step time", lambda: step_time(device, steps)),
    ]
    if not (args.cpu_only or args.skip_book):
        out = args.out or Path(tempfile.mkdtemp(prefix="qkov-device-check-"))
        out.mkdir(parents=True, exist_ok=True)
        chapters = tuple(chapter_names()) if args.all_chapters else DEVICE_CHAPTERS
        parts.append(
            (
                "4. smoke book on cuda",
                lambda: smoke_book(
                    out, chapters, args.budget_minutes * 60 - (time.perf_counter() - began) - 60, args.render
                ),
            )
        )
    results = []
    for name, check in parts:
        t = time.perf_counter()
        try:
            ok, text = check()
        except Exception as err:  # a part that crashes is a failed part; the others still run
            ok, text = False, f"{type(err).__name__}: {err}"
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'}  {name} ({time.perf_counter() - t:.0f} s): {text}", flush=True)
    print(f"device_check: {sum(results)} of {len(results)} parts passed in {time.perf_counter() - began:.0f} s")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
