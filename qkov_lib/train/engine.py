"""One engine for every synthetic run (Figure 2, the corollaries, Figure 3): a stack of single-layer attention models
(eq. 1), each with its own seed, data row, learning rates, QK/OV multipliers and ramp, OV weight decay, optimiser
state and stop, stepped together with a hand-derived backward pass (checked against autograd in the tests).

With one-hot tokens a sequence enters eq. (1) only through its token counts c[v] and its query token q: every
position holding token v gets the weight exp(s_v)/Z, so the attention mass on token v is
a[v] = c[v] exp(s_v) / sum_u c[u] exp(s_u) = softmax_v(s_v + log c[v]), and X^T softmax(.) = a (the "bag").
Only the query tokens' columns of W_QK are read (s_v = scale * W_QK[v, q]), and the OV circuit is applied as
W_O (W_V a) without forming the product. Figure 3's fixed attention is the same model with a given bag.
Models that reach their stop leave the stack, so the remaining ones run faster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from ..core.progress import bar
from .stack import Member, StackConfig, model_label
from .stack_optim import Optimiser, Rates
from .stacked import loss_and_grads
from .training import check_finite


@dataclass
class StackResult:
    """Per model: final parameters (no stack dimension), the step it stopped at (-1: its cap), the steps it ran,
    and its curve of mean mini-batch loss per ``eval_every`` steps."""

    params: list[dict[str, torch.Tensor]]
    stopped_at: np.ndarray
    steps_run: np.ndarray
    curves: list[list[tuple[int, float]]] = field(default_factory=list)

    @property
    def hit_cap(self) -> np.ndarray:
        return self.stopped_at < 0

    def stacked(self, name: str) -> torch.Tensor:
        return torch.stack([p[name] for p in self.params])


# ----------------------------------------------------------------------------------------------------------------
# The one outer loop of both engines (read-outs, stop rules, recording, models leaving) over a step kernel


Batch = Callable[[int, Sequence[int]], tuple[torch.Tensor, ...]]
Monitor = Callable[[dict[str, torch.Tensor], Sequence[int], int], np.ndarray | None]
FullNll = Callable[[dict[str, torch.Tensor], Sequence[int], int], np.ndarray]  # one training-set NLL per model
Recorder = Callable[[int, Sequence[int], dict[str, torch.Tensor], dict[str, torch.Tensor]], None]


class StepKernel(Protocol):
    """What trains under ``train_stack``'s one outer loop: the active models' parameters, optimiser state and
    batches. ``window`` [K] holds each active model's batch losses summed since the loop last zeroed it."""

    window: torch.Tensor

    def advance(self, start: int, stop: int, active: Sequence[int], record: bool) -> dict[str, torch.Tensor] | None:
        """Train the models ``active`` (ids, in stack order) over steps ``start`` to ``stop - 1``, adding their
        losses to ``window``; with ``record``, return the updates of step ``stop - 1``."""

    def params(self, rows: list[int] | None = None) -> dict[str, torch.Tensor]:
        """The active models' stacked parameters as they train, or a copy of those at positions ``rows``."""

    def model(self, j: int) -> dict[str, torch.Tensor]:
        """A copy of the parameters of the model at position ``j`` (no stack dimension)."""

    def keep(self, rows: list[int]) -> None:
        """Only the models at positions ``rows`` go on (models only ever leave the stack)."""


# A kernel for (params, members, sc, batch, query_ids, quiet): ``quiet`` when the progress bar is off
KernelFactory = Callable[
    [dict[str, torch.Tensor], Sequence[Member], StackConfig, Batch, torch.Tensor | None, bool], StepKernel
]


class TorchKernel:
    """The torch engine as a step kernel: one step at a time (the reference, and the CUDA path; it has no notice
    to keep ``quiet``)."""

    def __init__(
        self,
        params: dict[str, torch.Tensor],
        members: Sequence[Member],
        sc: StackConfig,
        batch: Batch,
        query_ids: torch.Tensor | None,
        quiet: bool,
    ) -> None:
        self.sc, self.batch, self.query_ids = sc, batch, query_ids
        self.work = {k: v.detach().clone() for k, v in params.items()}
        self.opt = Optimiser(sc, self.work)
        device = next(iter(self.work.values())).device
        self.decay = (
            torch.tensor([m.spec.ov_decay for m in members], device=device)
            if any(m.spec.ov_decay for m in members)
            else None
        )
        self.window = torch.zeros(len(members), device=device)
        self.rates = Rates(members, device)

    def advance(self, start: int, stop: int, active: Sequence[int], record: bool) -> dict[str, torch.Tensor] | None:
        updates = None
        for step in range(start, stop):
            inputs, slots, labels = self.batch(step, active)
            loss, grads = loss_and_grads(self.work, self.sc, inputs, slots, labels, self.query_ids)
            self.window += loss
            updates = self.opt.step(
                self.work,
                grads,
                self.rates.at(step, active),
                self.decay,
                step + 1,
                keep_updates=record and step == stop - 1,
            )
        return updates if record else None

    def params(self, rows: list[int] | None = None) -> dict[str, torch.Tensor]:
        return self.work if rows is None else {k: v[rows] for k, v in self.work.items()}

    def model(self, j: int) -> dict[str, torch.Tensor]:
        return {name: v[j].clone() for name, v in self.work.items()}

    def keep(self, rows: list[int]) -> None:
        index = torch.as_tensor(rows, dtype=torch.long, device=self.window.device)
        self.work = {name: v[index] for name, v in self.work.items()}
        self.opt.keep(index)
        self.window = self.window[index]
        self.decay = self.decay[index] if self.decay is not None else None


def _epoch_stops(
    running: torch.Tensor, members: Sequence[Member], active: Sequence[int], done: int, target: float
) -> list[int]:
    """The authors' stop rule (``StackConfig``) at step ``done`` for the active models that use it: which of them
    stop (positions in ``active``); resets their sums after every 100th epoch."""
    hits = []
    for j, k in enumerate(active):
        epoch = members[k].spec.stop_epoch
        if epoch is None or not members[k].spec.early_stop or done % epoch:
            continue
        if float(running[j]) / epoch <= target:
            hits.append(j)
        if (done // epoch) % 100 == 0:
            running[j] = 0.0
    return hits


def _chunk_end(step: int, every: int, cap: int, record_every: int) -> int:
    """Where the loop next looks, training from ``step``: the next read-out (a multiple of ``every``), the first cap
    of the models left, or just after the next recorded step, whichever comes first."""
    end = min((step // every + 1) * every, cap)
    if record_every:
        end = min(end, -(-step // record_every) * record_every + 1)
    return end


def train_stack(
    params: dict[str, torch.Tensor],
    members: Sequence[Member],
    sc: StackConfig,
    batch: Batch,
    query_ids: torch.Tensor | None = None,
    full_nll: FullNll | None = None,
    every_eval: Monitor | None = None,
    recorder: Recorder | None = None,
    record_every: int = 0,
    progress: bool = True,
    desc: str = "training",
    *,
    kernel: KernelFactory = TorchKernel,
) -> StackResult:
    """Train the stacked ``params`` [K, ...] (model k = ``members[k]``) on ``batch(step, active) -> (inputs, slots,
    labels)``. ``full_nll(params, active, step)`` returns the training-set NLL of the given models (the stop rule,
    see ``StackConfig``); ``every_eval`` is called every ``eval_every`` steps (Figure 3's read-outs);
    ``recorder(step, active, params, updates)`` sees every ``record_every``-th update (Section 8). Parameters are
    not modified.

    The one outer loop of both engines: the ``kernel`` (``TorchKernel``, or ``compiled.CompiledKernel`` as
    ``backends.train_stack`` picks) trains up to the next step the loop must look at (a read-out, a model's cap, a
    recorded step); the loop keeps the loss curves, both stop rules (Section 4) and the models that leave."""
    specs = [m.spec for m in members]
    for spec in specs:
        if spec.stop_epoch is not None and spec.stop_epoch % sc.eval_every:
            raise ValueError(f"stop_epoch = {spec.stop_epoch} must be a multiple of eval_every = {sc.eval_every}")
    n = len(members)
    final: list[dict[str, torch.Tensor] | None] = [None] * n
    stopped, steps_run = np.full(n, -1), np.zeros(n, dtype=int)
    curves: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    active, step, record = list(range(n)), 0, recorder is not None and record_every > 0
    with bar(None, desc, enabled=progress, total=max(spec.max_steps for spec in specs), leave=False) as steps:
        stack = kernel(params, members, sc, batch, query_ids, steps.disable)
        running = torch.zeros_like(stack.window)  # summed losses since the last reset, for the authors' stop rule
        while active:
            done = _chunk_end(step, sc.eval_every, min(specs[k].max_steps for k in active), record_every * record)
            recorded = record and (done - 1) % record_every == 0
            updates = stack.advance(step, done, active, recorded)
            steps.update(done - step)
            step = done
            if recorded and recorder is not None:  # recorded implies a recorder
                if updates is None:
                    raise RuntimeError(f"{type(stack).__name__} returned no updates for recorded step {done - 1}")
                recorder(done - 1, active, stack.params(), updates)
            finished = [j for j, k in enumerate(active) if specs[k].max_steps == done]
            window = stack.window
            if done % sc.eval_every == 0 or finished:

                def label(j: int, active: list[int] = active) -> str:
                    return model_label(members[active[j]])

                check_finite(window, done, label, sc.eval_every)
            if done % sc.eval_every == 0:
                mean = (window / sc.eval_every).cpu().numpy()
                running += window
                window.zero_()
                for j, k in enumerate(active):
                    curves[k].append((done, float(mean[j])))
                if every_eval is not None:
                    every_eval(stack.params(), active, done)
                if sc.target_nll > 0:
                    hits = _epoch_stops(running, members, active, done, sc.target_nll)
                    near = [
                        j
                        for j, k in enumerate(active)
                        if specs[k].early_stop and specs[k].stop_epoch is None and mean[j] <= sc.gate * sc.target_nll
                    ]
                    if near and full_nll is not None:
                        nll = full_nll(stack.params(near), [active[j] for j in near], done)
                        hits += [j for j, value in zip(near, nll) if value <= sc.target_nll]
                    stopped[[active[j] for j in hits]] = done
                    finished = sorted(set(finished) | set(hits))
            if finished:
                for j in finished:
                    final[active[j]] = stack.model(j)
                    steps_run[active[j]] = done
                keep = [j for j in range(len(active)) if j not in finished]
                stack.keep(keep)
                running = running[torch.as_tensor(keep, dtype=torch.long, device=running.device)]
                active = [active[j] for j in keep]
                steps.set_postfix_str(f"{len(active)} of {n} running")
    finished_params = [p for p in final if p is not None]
    if len(finished_params) != n:  # every model leaves the stack with its parameters
        raise RuntimeError(f"{n - len(finished_params)} of {n} models left the stack without their parameters")
    return StackResult(finished_params, stopped, steps_run, curves)
