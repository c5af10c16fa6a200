"""The synthetic engine compiled for the CPU (numba): ``CompiledKernel``, a step kernel of ``engine.train_stack``'s
one outer loop (``engine.StepKernel``), runs each model a chunk of steps at a time inside compiled code
(``kernels.train_chunk``: forward, the hand-derived backward and the update of eq. 1-2), up to the next step the loop
looks at. The loop keeps the rest, as for the torch engine: the loss curve, both stop rules (Section 4),
``full_nll``, ``every_eval`` and the recorder. Here: the stack as the kernels hold it (one float32 vector per model),
its batches a chunk at a time, the compile notice, and the repair of a damaged disk cache.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from numba.core import errors, event

from ..core.progress import notice
from . import kernels
from .counts import FixedBatches
from .engine import Batch
from .stack import QK_KINDS, Member, StackConfig

# ----------------------------------------------------------------------------------------------------------------
# The stack as the kernels hold it


class _Layout:
    """Where each parameter lives in a model's vector: the QK circuit of ``sc.qk``, then the OV circuit and bias
    the parameters hold (as ``stacked.loss_and_grads`` reads them); results keep the caller's order of names."""

    def __init__(self, params: dict[str, torch.Tensor], sc: StackConfig) -> None:
        ov = ("W_O", "W_V") if "W_V" in params else ("W_OV",)
        names = kernels.QK_NAMES[sc.qk] + ov + (("b_OV",) if "b_OV" in params else ())
        if set(names) != set(params):
            raise ValueError(f"a stack with {sc.qk} QK holds {', '.join(names)}; got {', '.join(params)}")
        for name, p in params.items():
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise TypeError(
                    f"the compiled engine trains float32 parameters on the CPU ({name} is {p.dtype} on "
                    f"{p.device}); set QKOV_ENGINE=torch for the torch engine"
                )
        self.shapes = {name: tuple(params[name].shape[1:]) for name in names}
        starts = np.cumsum([0] + [int(np.prod(self.shapes[name])) for name in names]).tolist()
        self.spans = {name: (a, b) for name, a, b in zip(names, starts[:-1], starts[1:])}
        self.order, self.size = list(params), starts[-1]

    def spec(self, sc: StackConfig, queries: int) -> kernels.Spec:
        shape, b1, b2 = self.shapes, *sc.betas
        ov_factorised = "W_V" in shape
        return kernels.Spec(
            qk=QK_KINDS.index(sc.qk),
            ov_factorised=ov_factorised,
            bias="b_OV" in shape,
            vocab=shape["W_V" if ov_factorised else "W_OV"][-1],
            queries=queries,
            outputs=shape["W_O" if ov_factorised else "W_OV"][0],
            d_qk=shape["W_K"][1] if "W_K" in shape else 0,
            d_ov=shape["W_V"][0] if ov_factorised else 0,
            ov_start=self.spans["W_O" if ov_factorised else "W_OV"][0],
            bias_start=self.spans.get("b_OV", (self.size,))[0],
            scale=kernels.F32(sc.score_scale),
            adamw=sc.optimizer == "adamw",
            beta1=kernels.F32(b1),
            beta2=kernels.F32(b2),
            rest1=kernels.F32(1 - b1),
            rest2=kernels.F32(1 - b2),
            eps=kernels.F32(sc.eps),
        )

    def flatten(self, params: dict[str, torch.Tensor]) -> np.ndarray:
        """[K, P]: every model's parameters as one vector."""
        return np.ascontiguousarray(
            np.concatenate(
                [params[name].detach().reshape(len(params[name]), -1).numpy() for name in self.spans], axis=1
            ),
            dtype=kernels.F32,
        )

    def views(self, flat: np.ndarray) -> dict[str, torch.Tensor]:
        """The parameters of the models in ``flat`` [K, P], stacked, as tensors that share its memory."""
        rows = torch.from_numpy(flat)
        return {name: rows[:, slice(*self.spans[name])].view(-1, *self.shapes[name]) for name in self.order}

    def model(self, vector: np.ndarray) -> dict[str, torch.Tensor]:
        """One model's parameters (no stack dimension), copied out of its vector."""
        return {
            name: torch.from_numpy(vector[slice(*self.spans[name])].reshape(self.shapes[name]).copy())
            for name in self.order
        }


class _Examples(NamedTuple):
    """A chunk's examples: a table of inputs [N, V] (log counts, or the bags of fixed attention), their query slots
    [N] (empty for fixed attention) and labels [N], and the rows [T, K, B] each model reads at each step."""

    table: np.ndarray
    slots: np.ndarray
    labels: np.ndarray
    rows: np.ndarray


def _array(t: torch.Tensor | None, dtype: type) -> np.ndarray:
    """A CPU tensor as a C-contiguous array of ``dtype`` (empty for None)."""
    return np.zeros(0, dtype) if t is None else np.ascontiguousarray(t.detach().cpu().numpy(), dtype=dtype)


class _FixedFeed:
    """``counts.FixedBatches``' batches a chunk at a time: its count set once, and each epoch's permutations from its
    own ``FixedSetBatches`` (whose ``indices`` draws them at an epoch's first step), so the order is the same bit
    for bit."""

    def __init__(self, source: FixedBatches) -> None:
        data = source.data
        self.table = _array(data.log_counts, kernels.F32).reshape(-1, data.log_counts.shape[-1])
        self.slots, self.labels = _array(data.slots, np.int64).reshape(-1), _array(data.labels, np.int64).reshape(-1)
        self.order, self.offsets = source.order, _array(source.offsets, np.int64)[:, 0]

    def __call__(self, start: int, stop: int, active: Sequence[int]) -> _Examples:
        order, size, parts, step = self.order, self.order.batch_size, [], start
        while step < stop:
            end = min(stop, (step // order.per_epoch + 1) * order.per_epoch)
            order.indices(step)
            first = step % order.per_epoch
            perms = order.perms.numpy()[active, first * size : (first + end - step) * size]
            parts.append(perms.reshape(len(active), end - step, size))
            step = end
        rows = np.concatenate(parts, axis=1) + self.offsets[active, None, None]
        return _Examples(self.table, self.slots, self.labels, np.ascontiguousarray(rows.transpose(1, 0, 2)))


class _CallFeed:
    """Any ``batch(step, active)`` (fresh batches, Figure 3's bags): called for every step, the tensors stacked."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch

    def __call__(self, start: int, stop: int, active: Sequence[int]) -> _Examples:
        inputs, slots, labels = zip(*(self.batch(step, active) for step in range(start, stop)))
        table = torch.stack(inputs)
        rows = np.arange(table[..., 0].numel()).reshape(table.shape[:3])
        return _Examples(
            _array(table, kernels.F32).reshape(-1, table.shape[-1]),
            _array(None if slots[0] is None else torch.stack(slots), np.int64).reshape(-1),
            _array(torch.stack(labels), np.int64).reshape(-1),
            rows,
        )


def _feed(batch: Batch) -> _FixedFeed | _CallFeed:
    source = getattr(batch, "__self__", None)
    if isinstance(source, FixedBatches) and getattr(batch, "__func__", None) is FixedBatches.take:
        return _FixedFeed(source)
    return _CallFeed(batch)


def _rates(members: Sequence[Member], active: Sequence[int], start: int, stop: int) -> np.ndarray:
    """[T, K, 2]: each active model's QK and OV learning rate at every step of the chunk (``optim.RateSchedule``)."""
    rates = np.empty((stop - start, len(active), 2))
    for j, k in enumerate(active):
        schedule = members[k].spec.rates
        ramp = schedule.qk_schedule == "ramp"
        rates[:, j, 0] = (
            [schedule.rate("qk", step) for step in range(start, stop)] if ramp else schedule.rate("qk", start)
        )
        rates[:, j, 1] = schedule.rate("ov", start)
    with np.errstate(over="ignore"):  # a rate beyond float32 is inf, as in torch; the loss check reports it
        return rates.astype(kernels.F32)


def _corrections(sc: StackConfig, start: int, stop: int) -> np.ndarray:
    """[T, 2]: AdamW's bias corrections 1 - beta^t at every step of the chunk (t counts from 1; SGD: unused)."""
    if sc.optimizer != "adamw":
        return np.ones((stop - start, 2), kernels.F32)
    b1, b2 = sc.betas
    return np.array([(1 - b1**t, 1 - b2**t) for t in range(start + 1, stop + 1)], kernels.F32)


class _CompileNotice(event.Listener):
    """Says so, once for a run and its worker processes, on stdout, when numba starts compiling the kernels (a
    cached start loads them); not where progress is off (the runner)."""

    said = False

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def on_start(self, ev) -> None:
        if not _CompileNotice.said and not self.quiet:
            notice("compile", "compiling the engine's kernels (once; cached afterwards)")
        _CompileNotice.said = True

    def on_end(self, ev) -> None:
        pass


def _train(quiet: bool, *args) -> None:
    """``kernels.train_chunk(*args)``, compiled on first use (or loaded from numba's cache); one clear error if that
    fails. A damaged disk cache (its files unreadable) is removed, said once, and the kernels are compiled afresh."""
    try:
        with event.install_listener("numba:compile", _CompileNotice(quiet)):
            try:
                kernels.train_chunk(*args)
            except Exception as err:  # what a damaged cache file raises varies: numba's caching in its traceback says
                if not _clear_damaged_cache(err):
                    raise
                kernels.train_chunk(*args)
    except errors.NumbaError as err:
        raise RuntimeError(
            f"numba could not compile the engine's kernels ({type(err).__name__}); set "
            f"QKOV_ENGINE=torch to train with the torch engine"
        ) from err


def _cache_files() -> list[Path]:
    """This module's kernels in numba's disk cache (``<cache>/compiled.<kernel>-<line>.py*.nbi`` and ``.nbc``)."""
    # the folder numba's cache locator chose (NUMBA_CACHE_DIR, ...)
    folder = Path(kernels.train_chunk._cache._cache_path)  # type: ignore[attr-defined]  # private: numba types omit it
    return sorted(p for p in folder.glob(f"{Path(kernels.__file__).stem}.*") if p.suffix in (".nbi", ".nbc"))


def _clear_damaged_cache(err: BaseException) -> bool:
    """When ``err`` came from reading numba's disk cache of these kernels (its traceback passes through numba's
    caching), remove this module's cache files and say so; whether it did."""
    frames = [f.filename for f in traceback.extract_tb(err.__traceback__)]
    if not any(Path(name).name == "caching.py" and "numba" in Path(name).parts for name in frames):
        return False
    files = _cache_files()
    for path in files:
        path.unlink(missing_ok=True)
    notice(
        "cache",
        f"numba's disk cache of the engine's kernels was damaged ({type(err).__name__}: {err}); "
        f"removed its {len(files)} files in {files[0].parent if files else 'the cache folder'} and "
        f"compiling the kernels afresh",
    )
    return True


class CompiledKernel:
    """The compiled engine as ``engine.train_stack``'s step kernel (``engine.StepKernel``): the models still training
    as the kernels hold them (parameter vectors [K, P], AdamW moments [2, K, P], OV decay), trained a chunk of steps
    at a time for float32 parameters on the CPU."""

    def __init__(
        self,
        params: dict[str, torch.Tensor],
        members: Sequence[Member],
        sc: StackConfig,
        batch: Batch,
        query_ids: torch.Tensor | None,
        quiet: bool,
    ) -> None:
        n, self.layout = len(members), _Layout(params, sc)
        self.qids = _array(query_ids, np.int64)
        self.spec = self.layout.spec(sc, len(self.qids))
        self.theta = self.layout.flatten(params)
        self.moments = np.zeros((2, n, self.layout.size if self.spec.adamw else 0), kernels.F32)
        self.decay = np.array([m.spec.ov_decay for m in members], kernels.F32)
        self.window = torch.zeros(n, dtype=torch.float32)  # the kernels add to it through its numpy view
        self.members, self.sc, self.feed, self.quiet = members, sc, _feed(batch), quiet

    def advance(self, start: int, stop: int, active: Sequence[int], record: bool) -> dict[str, torch.Tensor] | None:
        update = np.zeros((len(active), self.layout.size if record else 0), kernels.F32)
        _train(
            self.quiet,
            self.theta,
            self.moments,
            update,
            *self.feed(start, stop, active),
            self.qids,
            _rates(self.members, active, start, stop),
            _corrections(self.sc, start, stop),
            self.decay,
            self.window.numpy(),
            self.spec,
            record,
        )
        return self.layout.views(update) if record else None

    def params(self, rows: list[int] | None = None) -> dict[str, torch.Tensor]:
        return self.layout.views(self.theta if rows is None else self.theta[rows])

    def model(self, j: int) -> dict[str, torch.Tensor]:
        return self.layout.model(self.theta[j])

    def keep(self, rows: list[int]) -> None:
        self.theta, self.moments = self.theta[rows], np.ascontiguousarray(self.moments[:, rows])
        self.decay, self.window = self.decay[rows], self.window[rows]
