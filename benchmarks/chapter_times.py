"""Wall times of whole chapters under two source trees (old and new), one chapter after the other, for a machine
otherwise idle: each chapter runs through the runner (``python -m qkov_lib reproduce --only <chapter> --force``) with
the old tree, then with the new one, each into its own fresh results folder (so no finished cell or unit is reused),
and the table gives both wall times and their ratio.

Both trees run on this script's Python environment (``--python`` to choose another), so only the code differs; each
tree's ``qkov_lib`` is put first on PYTHONPATH (the check below refuses to time a tree whose import resolves
elsewhere). Before the timed runs each tree runs Figure 2's quick profile once, untimed, so that the compiled
engine's kernels are compiled and cached in that tree (``--no-warmup`` to time a cold start instead).

Usage: python benchmarks/chapter_times.py OLD_TREE NEW_TREE WORK_DIR [--profile default]
           [--chapters fig2_dtap,fig3_incentive,corollaries,atlas] [--python PATH] [--no-warmup]
           [--env-old NAME=VALUE ...] [--env-new NAME=VALUE ...]

The same tree twice with ``--env-old QKOV_PORTABLE=0 --env-new QKOV_PORTABLE=1`` gives the portable mode's cost per
chapter (the ratio old/new is then off/on: below 1 where the mode is slower).

Measured (2 cores of an AMD EPYC, ~100 GFLOP/s sgemm, alone on the machine; the same tree with
``--env-old QKOV_ENGINE=torch --env-new QKOV_ENGINE=compiled``, profile default): Figure 2 804 -> 317 s (2.54x),
Figure 3 795 -> 498 s (1.60x), the corollaries 739 -> 314 s (2.35x), all three 2338 -> 1129 s (2.07x), the same
verdicts. The atlas (18 settings and the 12-run ablation) took 1353 s with the compiled engine alone.

WORK_DIR receives each run's executed notebook, results and log (WORK_DIR/<old|new>/<chapter>/) and the table
(WORK_DIR/chapter_times.txt). Run it alone on the machine: the times are wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CHAPTERS = ("fig2_dtap", "fig3_incentive", "corollaries", "atlas")


def environment(tree: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a run of ``tree`` gets: its qkov_lib first on PYTHONPATH (the kernel papermill starts
    inherits it), and ``extra``."""
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def check_tree(tree: Path, python: str) -> None:
    """Refuse a tree that is not a checkout of this project, or whose qkov_lib import resolves elsewhere."""
    if not (tree / "qkov_lib" / "__init__.py").is_file():
        sys.exit(
            f"{tree} is not a source tree of this project (no qkov_lib/__init__.py); pass the root of a "
            f"checkout, e.g. one made with `git worktree add ../old <commit>`"
        )
    found = subprocess.run(
        [python, "-c", "import qkov_lib; print(qkov_lib.__file__)"],
        cwd=tree,
        env=environment(tree),
        capture_output=True,
        text=True,
    )
    where = Path(found.stdout.strip() or "?").resolve()
    if found.returncode or tree.resolve() not in where.parents:
        sys.exit(
            f"in {tree}, `import qkov_lib` gives {where} ({found.stderr.strip()[-300:]}); the times would not "
            f"be that tree's"
        )


def run_chapter(
    tree: Path, python: str, chapter: str, profile: str, out: Path, extra: dict[str, str] | None = None
) -> tuple[float, int, float | None]:
    """Run one chapter of ``tree`` at ``profile`` into ``out`` with ``extra`` in its environment; (wall seconds, exit
    status, the chapter's own wall time from its metadata, or None)."""
    out.mkdir(parents=True, exist_ok=True)
    command = [
        python,
        "-m",
        "qkov_lib",
        "reproduce",
        "--profile",
        profile,
        "--only",
        chapter,
        "--force",
        "--out",
        str(out / "chapters"),
        "--results",
        str(out / "results"),
    ]
    start = time.perf_counter()
    with open(out / "log.txt", "w") as log:
        status = subprocess.run(
            command, cwd=tree, env=environment(tree, extra), stdout=log, stderr=subprocess.STDOUT
        ).returncode
    wall = time.perf_counter() - start
    meta = out / "results" / profile / f"{chapter}.json"
    own = json.loads(meta.read_text()).get("wall_time_s") if meta.exists() else None
    return wall, status, own


def _pairs(parser: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    """NAME=VALUE strings as a dict; a malformed one is a usage error."""
    bad = [i for i in items if "=" not in i or not i.split("=", 1)[0]]
    if bad:
        parser.error(f"--env-old/--env-new take NAME=VALUE (got {bad})")
    return dict(i.split("=", 1) for i in items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="the old source tree")
    parser.add_argument("new", type=Path, help="the new source tree")
    parser.add_argument("work", type=Path, help="a folder for the runs' results, logs and the table")
    parser.add_argument("--profile", default="default", help="the profile every chapter runs at (default: default)")
    parser.add_argument("--chapters", default=",".join(CHAPTERS), help="comma-separated chapters, run in this order")
    parser.add_argument("--python", default=sys.executable, help="the Python both trees run on (default: this one)")
    parser.add_argument(
        "--env-old",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the old tree's runs (repeatable); with the same tree twice "
        "this times a setting, e.g. --env-old QKOV_PORTABLE=0 --env-new QKOV_PORTABLE=1",
    )
    parser.add_argument(
        "--env-new",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the new tree's runs (repeatable)",
    )
    parser.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip the untimed quick run that compiles and caches the compiled engine's kernels in each tree",
    )
    args = parser.parse_args()
    chapters = [c.strip() for c in args.chapters.split(",") if c.strip()]
    if not chapters:
        parser.error("--chapters names no chapter")
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    extra = {"old": _pairs(parser, args.env_old), "new": _pairs(parser, args.env_new)}
    for tree in trees.values():
        check_tree(tree, args.python)
    if not args.no_warmup:
        for label, tree in trees.items():
            print(f"warm-up ({label}): Figure 2's quick profile, untimed", flush=True)
            run_chapter(tree, args.python, "fig2_dtap", "smoke", args.work / label / "warmup", extra[label])
    rows = []
    for chapter in chapters:
        times = {}
        for label, tree in trees.items():
            print(f"{chapter} ({label}, {tree}) ...", end=" ", flush=True)
            wall, status, own = run_chapter(
                tree, args.python, chapter, args.profile, args.work / label / chapter, extra[label]
            )
            times[label] = wall
            print(
                f"{wall:.0f} s"
                + (f" (the chapter's own: {own:.0f} s)" if own else "")
                + (f", exit status {status}: see {args.work / label / chapter / 'log.txt'}" if status else ""),
                flush=True,
            )
        rows.append((chapter, times["old"], times["new"]))
    settings = "".join(
        f"; {label}: {' '.join(args.env_old if label == 'old' else args.env_new)}"
        for label in ("old", "new")
        if extra[label]
    )
    lines = [
        f"wall time per chapter, profile {args.profile}, one after the other{settings}",
        f"{'chapter':20} {'old s':>9} {'new s':>9} {'old/new':>8}",
    ]
    lines += [f"{c:20} {o:>9.0f} {n:>9.0f} {o / n:>7.2f}x" for c, o, n in rows]
    old, new = sum(o for _, o, _ in rows), sum(n for _, _, n in rows)
    lines.append(f"{'all':20} {old:>9.0f} {new:>9.0f} {old / new:>7.2f}x")
    table = "\n".join(lines)
    print(table)
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / "chapter_times.txt").write_text(table + "\n")


if __name__ == "__main__":
    main()
