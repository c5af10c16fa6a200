"""What the atlas would cost under ``official``, from the compute times the committed store records for its
``default`` runs: the grid is the same under both, and the ablation runs ``ablation_speedup`` times the steps at the
authors' rate. Page code only (no stored run's key holds it)."""

from __future__ import annotations

from ...core import paths, results
from ...runs.store_verify import manifested
from .setup import PROFILES

HOURS_ALLOWED = 3.0  # what this companion gives one official chapter on two cores


def default_compute_s() -> tuple[float, float] | None:
    """The CPU seconds the committed ``default`` store records for the atlas's grid cells and for its ablation runs;
    None when that store holds none."""
    folder = paths.STORE_ROOT / "default" / "atlas"
    grid = ablation = 0.0
    stems = [p.stem for p in folder.glob("*.json") if p.name != "manifest.json" and manifested(folder, p.stem)]
    for stem in stems:
        meta = results.read_meta(folder, stem)
        seconds = float(meta.get("compute_s") or 0.0)
        if "run" in meta.get("values", {}).get("cell", {}):
            ablation += seconds
        else:
            grid += seconds
    return (grid, ablation) if stems else None


def official_cost(cores: int = 2) -> str:
    """The atlas's cost under ``official`` in words, estimated from ``default_compute_s``, and whether the official
    store holds it (only when it fits in ``HOURS_ALLOWED`` on ``cores`` cores)."""
    found = default_compute_s()
    if found is None:
        return "Its cost under `official` is not known: the committed store holds no `default` run of the atlas."
    grid, ablation = found
    speedups = [float(str(PROFILES[p]["ablation_speedup"])) for p in ("default", "official")]
    factor = speedups[0] / speedups[1]
    cpu_h = (grid + factor * ablation) / 3600
    verdict = (
        f"more than the {HOURS_ALLOWED:g} hours an official chapter is given, so the official store does not hold it "
        "and the official book shows this page only when built with that time"
        if cpu_h / cores > HOURS_ALLOWED
        else f"within the {HOURS_ALLOWED:g} hours an official chapter is given"
    )
    return (
        f"Under `official` the ablation runs at the authors' rate with their budgets, {factor:g} times the steps of "
        f"the `default` profile's. From the compute times the committed store records for the `default` runs "
        f"({grid:,.0f} CPU seconds for the grid, {ablation:,.0f} for the ablation), that is about {cpu_h:.0f} hours "
        f"of CPU, {cpu_h / cores:.1f} hours on {cores} cores: {verdict}."
    )
