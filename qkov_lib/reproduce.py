"""The papermill runner: run chapters (jupytext sources) under a profile, keep tidy results, skip what is unchanged."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from . import results
from .profiles import CHAPTERS, ParameterError, chapter_spec, concrete_profile, resolve
from .progress import PROGRESS_ENV

NOTEBOOKS_DIR = results.REPO_ROOT / "notebooks"
BOOK_CHAPTERS = results.REPO_ROOT / "book" / "chapters"
RESULTS_ROOT = results.REPO_ROOT / "data" / "results"


class ChapterFailed(RuntimeError):
    """A chapter raised while running; the message names the chapter and the failing cell."""


def split_overrides(chapters: Sequence[str], pairs: Sequence[tuple[str, Any]]) -> dict[str, dict[str, Any]]:
    """Give each -p NAME VALUE to every selected chapter that has NAME; a NAME that none has is an error."""
    out: dict[str, dict[str, Any]] = {c: {} for c in chapters}
    for name, value in pairs:
        owners = [c for c in chapters if name in chapter_spec(c).paper]
        if not owners:
            known = sorted({k for c in chapters for k in chapter_spec(c).paper})
            raise ParameterError(f"unknown parameter {name!r} in -p; the selected chapters take: {', '.join(known)}")
        for c in owners:
            out[c][name] = value
    return out


def select(only: Sequence[str] | None) -> list[str]:
    """Chapters in book order; ``only`` picks some of them by name."""
    if not only:
        return list(CHAPTERS)
    for name in only:
        chapter_spec(name)
    return [c for c in CHAPTERS if c in only]


def fingerprint(chapter: str, profile: str, params: dict[str, Any], results_root: Path = RESULTS_ROOT) -> str:
    """What a chapter's output depends on: its source, its resolved parameters, the library and, for a chapter that
    reads other chapters' results (the scorecard), their claim tables."""
    digest = hashlib.sha256((NOTEBOOKS_DIR / f"{chapter}.md").read_bytes())
    digest.update(json.dumps({"profile": profile, "params": params}, sort_keys=True).encode())
    digest.update(results.library_fingerprint().encode())
    if chapter_spec(chapter).reads_results:
        for path in sorted((results_root / profile).glob("*.claims.csv")):
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def _up_to_date(chapter: str, final: Path, notebook: Path, fp: str) -> bool:
    try:
        meta = json.loads((final / f"{chapter}.json").read_text())
    except (OSError, ValueError):
        return False
    tables_exist = all(results.table_path(final, chapter, t).exists() for t in meta.get("tables", []))
    return meta.get("fingerprint") == fp and tables_exist and notebook.exists()


def _execute(chapter: str, profile: str, overrides: dict[str, Any], staging: Path, results_root: Path,
             progress: bool = True) -> Path:
    """Run the chapter with papermill, its results going to ``staging``; returns the executed notebook's path."""
    import jupytext
    import papermill
    from papermill.exceptions import PapermillExecutionError

    nb = jupytext.read(NOTEBOOKS_DIR / f"{chapter}.md")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    executed = staging / f"{chapter}.ipynb"
    env = {results.RESULTS_ENV: str(staging), results.ROOT_ENV: str(results_root), PROGRESS_ENV: "0"}
    previous = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # progress off: the runner shows cell progress
    try:
        papermill.execute_notebook(nb, str(executed), parameters={"profile": profile, "overrides": overrides},
                                   kernel_name="python3", cwd=str(NOTEBOOKS_DIR), progress_bar=progress,
                                   extra_arguments=["--IPKernelApp.log_level=ERROR"])  # no transport notice
    except PapermillExecutionError as err:
        kept = Path(tempfile.gettempdir()) / "qkov-failed" / f"{chapter}.ipynb"
        kept.parent.mkdir(exist_ok=True)
        if executed.exists():
            shutil.copy(executed, kept)
        raise ChapterFailed(f"chapter {chapter!r} failed in cell {err.cell_index} (execution count "
                            f"{err.exec_count}): {err.ename}: {err.evalue}\n  the failed notebook is kept at "
                            f"{kept}") from None
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if not (staging / f"{chapter}.json").exists():
        raise ChapterFailed(f"chapter {chapter!r} ran but saved no results (it must call Chapter.save)")
    _drop_paths(executed)
    return executed


def _drop_paths(executed: Path) -> None:
    """Remove papermill's input/output paths from the notebook metadata: the book offers the .ipynb for download."""
    import nbformat
    nb = nbformat.read(executed, as_version=4)
    for key in ("input_path", "output_path"):
        nb.metadata.get("papermill", {}).pop(key, None)
    nbformat.write(nb, executed)


def _publish(chapter: str, staging: Path, final: Path, out_dir: Path, fp: str, wall: float) -> None:
    """Move a finished run into place: results, stamped with the fingerprint, then the executed notebook."""
    meta_path = staging / f"{chapter}.json"
    meta = json.loads(meta_path.read_text())
    meta.update(fingerprint=fp, runner_wall_time_s=round(wall, 3))
    results.write_atomic(meta_path, json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
    final.mkdir(parents=True, exist_ok=True)
    for old in final.glob(f"{chapter}.*"):
        old.unlink()
    for path in staging.iterdir():
        if path.suffix != ".ipynb":
            os.replace(path, final / path.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(staging / f"{chapter}.ipynb", out_dir / f".{chapter}.ipynb.tmp")
    os.replace(out_dir / f".{chapter}.ipynb.tmp", out_dir / f"{chapter}.ipynb")


def run_chapter(chapter: str, profile: str, overrides: dict[str, Any], out_dir: Path = BOOK_CHAPTERS,
                results_root: Path = RESULTS_ROOT, force: bool = False) -> str:
    """Run one chapter unless it is up to date; returns 'ran' or 'skipped'. Nothing is left behind on failure."""
    profile, params = resolve(chapter, profile, overrides)
    final, notebook = results_root / profile, out_dir / f"{chapter}.ipynb"
    fp = fingerprint(chapter, profile, params, results_root)
    if not force and _up_to_date(chapter, final, notebook, fp):
        return "skipped"
    results_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".staging-{chapter}-", dir=results_root))
    try:
        start = time.perf_counter()
        _execute(chapter, profile, overrides, staging, results_root)
        _publish(chapter, staging, final, out_dir, fp, time.perf_counter() - start)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return "ran"


def reproduce(profile: str = "auto", pairs: Sequence[tuple[str, Any]] = (), only: Sequence[str] | None = None,
              force: bool = False, out_dir: Path = BOOK_CHAPTERS, results_root: Path = RESULTS_ROOT) -> list[str]:
    """Run the selected chapters; every parameter is checked before any chapter starts. Returns failure messages."""
    chapters = select(only)
    profile = concrete_profile(profile)
    per_chapter = split_overrides(chapters, pairs)
    for c in chapters:
        resolve(c, profile, per_chapter[c])
    failures = []
    for c in (bar := tqdm(chapters, desc=f"chapters ({profile})", unit="chapter")):
        bar.set_postfix_str(c)
        start = time.perf_counter()
        try:
            status = run_chapter(c, profile, per_chapter[c], out_dir, results_root, force)
        except ChapterFailed as err:
            failures.append(str(err))
            tqdm.write(f"FAILED {err}")
            continue
        tqdm.write(f"{status:>7}  {c}  ({time.perf_counter() - start:.1f} s)")
    return failures


def build_book(root: Path = results.REPO_ROOT, out_dir: Path | None = None, strict: bool = True) -> Path:
    """Render the book with Jupyter Book 1.x from executed chapters (no execution at build time); returns index.html."""
    out_dir = out_dir or root / "book" / "chapters"
    missing = [c for c in CHAPTERS if not (out_dir / f"{c}.ipynb").exists()]
    if missing:
        raise ParameterError(f"chapters not yet executed: {', '.join(missing)}; run "
                             f"'python -m qkov_lib reproduce' first")
    import plotly
    static = root / "book" / "_static"
    static.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", static / "plotly.min.js")
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(root), "--all"]
    cmd += ["-W", "-n", "--keep-going"] if strict else []
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"jupyter-book build failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}"
                           f"\n{proc.stderr[-4000:]}")
    return root / "_build" / "html" / "index.html"
