"""Where Figure 2's claims hold (Section 4): the Figure 2 panels retrained over a grid of settings the paper does not
state, and an ablation from the paper's text to the authors' code, one factor at a time.

A grid cell is a *setting*: the initialisation (kind and scale), the learning rate and the score scaling (1, or
1/sqrt(d) as in the authors' notebooks). In each setting the four parameterisations (a-d) and, for every set of QK
multipliers, the four faster-QK panels (e-h) train for every seed, one task of ``sweep.run_sweep``; Figure 2's own
claim checks (``fig2_dtap.claims``) then give a verdict per setting and multiplier set.

The ablation runs Figure 2 from the paper's text (``fig2_dtap.Setup()``) towards the authors' code
(``fig2_dtap.PROFILES["official"]``), whose keys fall into nine factors (``setup.FACTORS``): from the paper's settings
each factor switched on alone, from the authors' settings each switched off alone, and the two end points, every run
one task of the same sweep. Its budget is time-rescaled: the learning rate times ``ablation_speedup`` and every step
count divided by it, so that rate x steps, the time of gradient flow, stays the paper's and the authors'.

The chapter is a package: ``setup`` (its setup, profiles and the ablation's factors), ``grid`` (the settings, their
training and verdicts), ``ablation`` (its runs, their training and which factor flips which claim), ``pages`` (what
the page shows); this module runs the sweep over both.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ...runs.sweep import SweepRun, cell_folder, run_sweep
from . import ablation, grid
from .setup import PROFILES, Setup, shared

__all__ = ["PROFILES", "VERDICTS", "Setup", "run", "run_setting", "sweep_folders", "tasks"]

VERDICTS = "verdicts"  # the table of verdicts per setting, which the scorecard reads


def sweep_folders(setup: Setup) -> list[Path]:
    """Where the atlas's sweep keeps its finished cells when it runs outside a chapter (inside one, each setting is a
    stored run of the results store, which bundles carry)."""
    return [cell_folder("atlas", shared(setup), run_setting)]


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> SweepRun:
    """The atlas: every grid setting and ablation run not yet finished under this code and these shared settings,
    on the setup's scheduler (serial, a local cluster, or a Dask scheduler), then every cell's rows. ``device`` is
    unused: every cell trains on a CPU worker of one thread."""
    return run_sweep(
        run_setting,
        tasks(setup),
        shared(setup),
        sweep_folders(setup)[0],
        scheduler=setup.scheduler,
        workers=setup.workers,
        progress=progress,
        desc="atlas",
    )


def tasks(setup: Setup) -> list[dict[str, Any]]:
    """The sweep's tasks: the ablation's runs (the longest, so first) and the grid's settings."""
    return ablation.cells(setup.ablation_factors, setup.ablation_speedup, setup.ablation_cap) + grid.settings(setup)


def run_setting(cell: Mapping[str, Any], common: Mapping[str, Any]) -> pd.DataFrame:
    """One sweep task, trained here on one thread: a grid setting (``grid.train_setting``) or, for a cell that names
    an ablation run, that run (``ablation.train_run``)."""
    if grid.RUN in cell:
        return ablation.train_run(cell, common)
    return grid.train_setting(cell, common)
