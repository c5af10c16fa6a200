"""The evidence behind "same seed, same numbers on any machine" (book/reproduce.md): the same chapters run under
emulated CPUs, with the portable arithmetic mode on and off, compared table by table; and how far the claims' verdicts
move between two CPUs outside the mode.

Input: a folder of results roots named ``<machine>-<on|off>[-<profile>]`` (each a ``--results`` root of
``python -m qkov_lib reproduce``), the first machine being the reference (the CPU it all ran on). Output: markdown
tables on stdout, or into the file given with ``--out`` (``book/generated/portable.md``, included by the reproduce
page).

    python benchmarks/portable_evidence.py RUNS --machines amd-avx512,amd-avx2,intel-avx512,intel-avx2 \
        --out book/generated/portable.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from qkov_lib.core.contents import title

MACHINES = {  # emulated CPUs: what each is, for the table
    "amd-avx512": "this CPU (AMD, AVX-512)",
    "amd-avx2": "an AMD CPU without AVX-512",
    "intel-avx512": "an Intel CPU with AVX-512",
    "intel-avx2": "an Intel CPU with AVX2 only",
}


def named(chapter: str, profile: str) -> str:
    """A chapter as a reader names it, by its title and profile: 'Figure 2 (smoke)', 'HateXplain (default)'."""
    figure, _, subject = title(chapter).partition(": ")
    return f"{subject if figure.startswith('Table') else figure} ({profile})"


def unit_tables(root: Path, profile: str, chapter: str) -> dict[str, Path]:
    """A unit's result tables (``<chapter>.csv``, ``<chapter>.<table>.csv``) by table name; {} when not run."""
    folder = root / profile
    if not (folder / f"{chapter}.json").exists():
        return {}
    return {
        p.name.removeprefix(chapter).strip(".").removesuffix("csv").strip(".") or "main": p
        for p in sorted(folder.glob(f"{chapter}*.csv"))
        if p.name.split(".")[0] == chapter
    }


def largest_difference(a: Path, b: Path) -> tuple[float, str]:
    """The largest absolute difference between two tables' numeric cells, and its column."""
    x, y = pd.read_csv(a), pd.read_csv(b)
    if x.shape != y.shape:
        return np.inf, f"shape {x.shape} against {y.shape}"
    num = [
        c
        for c in x.columns
        if all(pd.api.types.is_numeric_dtype(t[c]) and not pd.api.types.is_bool_dtype(t[c]) for t in (x, y))
    ]
    if not num:
        return np.nan, "text only"
    diff = (x[num].astype(float) - y[num].astype(float)).abs().max()
    return float(diff.max()), str(diff.idxmax())


def compare(ref: dict[str, Path], other: dict[str, Path]) -> str:
    """'identical' when every table has the same bytes, else the largest difference and where."""
    if not ref or not other:
        return "not run"
    if set(ref) != set(other):
        return f"other tables ({sorted(set(ref) ^ set(other))})"
    same = [hashlib.sha256(ref[k].read_bytes()).digest() == hashlib.sha256(other[k].read_bytes()).digest() for k in ref]
    if all(same):
        return "identical"
    worst = max(
        (largest_difference(ref[k], other[k]) + (k,) for k, s in zip(ref, same) if not s),
        key=lambda t: -1 if np.isnan(t[0]) else t[0],
    )
    size, column, table = worst
    where = f"{table}: {column}" if table != "main" else column
    return f"differs: {sum(not s for s in same)} of {len(same)} tables, largest {size:.2g} ({where})"


def identity_table(runs: Path, machines: list[str], chapters: list[tuple[str, str]]) -> pd.DataFrame:
    """Per chapter (and profile) and mode: each emulated machine's tables against the reference machine's."""
    rows = []
    for chapter, profile in chapters:
        for mode in ("on", "off"):

            def root(m: str) -> Path:
                return runs / (f"{m}-{mode}" + ("" if profile == "default" else f"-{profile}"))

            ref = unit_tables(root(machines[0]), profile, chapter)
            rows.append(
                {
                    "chapter": named(chapter, profile),
                    "portable mode": mode,
                    **{MACHINES.get(m, m): compare(ref, unit_tables(root(m), profile, chapter)) for m in machines[1:]},
                }
            )
    return pd.DataFrame(rows)


def verdict_changes(runs: Path, a: str, b: str, chapters: list[tuple[str, str]]) -> pd.DataFrame:
    """Outside the mode: per chapter, how many claims each machine checks and which verdicts differ between them."""
    rows = []
    for chapter, profile in chapters:
        suffix = "" if profile == "default" else f"-{profile}"
        tables = [unit_tables(runs / f"{m}-off{suffix}", profile, chapter).get("claims") for m in (a, b)]
        if not all(tables):
            rows.append({"chapter": named(chapter, profile), "claims": "not run", "changed": "", "holds ↔ fails": ""})
            continue
        x, y = (pd.read_csv(t).set_index("id")["verdict"] for t in tables)
        moved = [f"{i}: {x[i]} → {y[i]}" for i in x.index if i in y.index and x[i] != y[i]]
        flips = sum({x[i], y[i]} == {"holds", "fails"} for i in x.index if i in y.index)
        rows.append(
            {
                "chapter": named(chapter, profile),
                "claims": len(x),
                "changed": "; ".join(moved) or "none",
                "holds ↔ fails": flips,
            }
        )
    return pd.DataFrame(rows)


def metadata(runs: Path, machines: list[str], chapter: str, profile: str) -> str:
    """The effective arithmetic settings recorded in each run's metadata (a line per machine and mode)."""
    lines = []
    for m in machines:
        for mode in ("on", "off"):
            suffix = "" if profile == "default" else f"-{profile}"
            meta = runs / f"{m}-{mode}{suffix}" / profile / f"{chapter}.json"
            if meta.exists():
                a = json.loads(meta.read_text()).get("arithmetic", {})
                lines.append(
                    f"- {MACHINES.get(m, m)}, mode {mode}: ATen {a.get('cpu_capability')}, MKL branch "
                    f"{a.get('mkl_cbwr')}"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path)
    parser.add_argument("--machines", default=",".join(MACHINES))
    parser.add_argument("--chapters", default="fig2_dtap:smoke,fig2_dtap:default,hatexplain:default,sva:default")
    parser.add_argument("--verdicts", default="fig2_dtap:smoke,fig2_dtap:default,hatexplain:default")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    machines = args.machines.split(",")
    pairs = [tuple(c.split(":")) for c in args.chapters.split(",")]
    verdict_pairs = [tuple(c.split(":")) for c in args.verdicts.split(",")]
    text = (
        "<!-- generated by benchmarks/portable_evidence.py; do not edit -->\n\n"
        f"Each emulated CPU's result tables against those of {MACHINES.get(machines[0], machines[0])}, with the "
        "portable mode on and off:\n\n"
        + identity_table(args.runs, machines, pairs).to_markdown(index=False)
        + f"\n\nVerdicts outside the mode, {MACHINES.get(machines[0])} against {MACHINES.get(machines[1])}:\n\n"
        + verdict_changes(args.runs, machines[0], machines[1], verdict_pairs).to_markdown(index=False)
        + "\n"
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
