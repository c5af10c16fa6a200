"""The publishing workflow's steps, as one command the workflow calls (``python -m qkov_lib publish``):

1. restore the profile's last results from a bundle (the workflow's cache or the previous run's artifact); a missing
   or unusable bundle means starting fresh, said in the log;
2. optionally fetch the datasets (best effort; a chapter whose data is missing says so on its page);
3. ``make book PROFILE=<profile>``, so only stale chapters rerun (after taking in what the live site publishes and
   this checkout can use, ``published.fetch``), within a time budget (``BUDGET`` minutes: a stale chapter that would
   not fit is not started and its page shows its last results, saying so);
4. pack the results into the bundle again (also after a failed chapter: what finished is kept);
5. print the report (``report.write_report``: the built book as one A4 article, ``report.pdf`` beside it; best
   effort, the log says why where it cannot be printed) and put the built HTML under ``<site>/<profile>/`` beside
   the other profiles' last builds, with an index page
   linking them (one Pages site: ``/default/``, ``/official/``, ``/paper/``), and its sealed units beside it,
   ``<site>/<profile>/results/`` (``published.write``: one bundle per chapter and an index, what a fresh clone's
   ``make book`` starts from); given the repository's address, each chapter's Colab
   notebook (``notebooks.colab_notebook``: it installs the companion at this build's commit) goes to
   ``<site>/<profile>/colab/<chapter>.ipynb``. Colab opens only files in a GitHub repository (or a gist), not a
   Pages site, so the workflow puts that folder on the branch ``colab`` too, where each chapter page's "open in
   Colab" link points (``notebooks.colab_link``).

The exit status is ``make book``'s (1 when a chapter failed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..core import files, results
from ..core.chapter import PROFILES, ParameterError
from ..core.contents import chapter_names
from ..core.paths import HTML, REPO_ROOT, RESULTS_ROOT
from ..data.registry import CANONICAL, DataError, canonical_file
from ..present.site_html import Entry, profiles_page
from . import bundle, notebooks, published, report, report_print, unpack
from .plan import format_plan, plan

COLAB_DIR = "colab"  # <site>/<profile>/colab/<chapter>.ipynb: the chapters for Colab
STAMP = "publish.json"  # <site>/<profile>/publish.json: what the index page says about that build
DESCRIPTIONS = {  # the index page's line per profile
    "default": "every chapter at reduced sizes on a CPU, rebuilt on every push to main (only the chapters a change "
    "touches rerun)",
    "paper": "the paper's settings, run by hand on a GPU runner",
    "official": "the authors' notebooks' settings where they differ from the paper, on a CPU, rebuilt after the "
    "default book on every push to main (only the chapters a change touches rerun)",
    "smoke": "tiny settings that check the pipeline, not the claims",
}
Build = Callable[[Sequence[str]], int]  # make's arguments -> exit status
Report = Callable[..., dict]  # report.write_report: (profile, pdf, html_dir, root) -> what it printed


def make(args: Sequence[str]) -> int:
    """Run ``make`` in the repository with ``args``; its exit status."""
    return subprocess.run(["make", *args], cwd=REPO_ROOT).returncode


def restore(path: Path, profile: str, results_root: Path, log: Callable[[str], None]) -> bool:
    """Unpack the profile's last bundle into ``results_root``; False (and a line in the log) when there is none or
    it cannot be used, which means starting fresh."""
    if not path.is_file():
        log(
            f"no results bundle at {path}: starting fresh (every chapter without current results in "
            f"{results_root} runs)"
        )
        return False
    try:
        done = unpack.unpack(path, results_root, profile)
    except bundle.BundleError as err:
        log(
            f"the results bundle cannot be used ({err}): starting fresh (every chapter without current results in "
            f"{results_root} runs)"
        )
        return False
    commit = (done.manifest.get("commit") or "an unknown commit")[:12]
    log(
        f"restored {len(done.units)} units of {profile} and {done.stored_runs} stored runs from {path} (packed at "
        f"{commit}); the book reruns only the stale chapters, from their stored runs "
        f"where their keys match"
    )
    return True


def fetch_datasets(log: Callable[[str], None]) -> None:
    """Download every dataset's canonical release into the cache, best effort: a failure is logged, and the chapter
    that needs the data then says on its page how to get it."""
    for dataset, names in CANONICAL.items():
        try:
            for name in names:
                canonical_file(dataset, name, download=True)
        except (DataError, OSError) as err:
            log(f"could not fetch {dataset} ({err}); its chapters will say so")


def make_args(profile: str, budget_minutes: float | None, repo_url: str | None, strict: bool) -> list[str]:
    """``make book``'s arguments for this build."""
    args = ["book", f"PROFILE={profile}"]
    args += [f"BUDGET={budget_minutes:g}"] if budget_minutes is not None else []
    args += [f"REPO_URL={repo_url}"] if repo_url else []
    return args + (["STRICT=1"] if strict else [])


def write_colab(folder: Path, repo_url: str, commit: str, names: Sequence[str] | None = None) -> list[Path]:
    """Each chapter (``names``, default the book's) as its Colab notebook, installing the companion from
    ``repo_url`` at ``commit``, in ``folder`` (made if missing); the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    return [
        notebooks.write_colab_notebook(name, folder, repo_url, commit)
        for name in (chapter_names() if names is None else names)
    ]


def place_site(
    html_dir: Path, site: Path, profile: str, stamp: dict[str, Any], extra: Callable[[Path], Any] | None = None
) -> Path:
    """Copy the built book to ``<site>/<profile>/`` (replacing the previous one whole; ``extra`` adds its own files
    to the new folder first) and write the index page for every profile the site holds; returns the index page."""
    if not (html_dir / "index.html").is_file():
        raise FileNotFoundError(f"{html_dir} holds no built book (index.html); the book build failed")
    site.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(dir=site, prefix=f".{profile}-"))
    try:
        shutil.copytree(html_dir, staged, dirs_exist_ok=True)
        (staged / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
        if extra is not None:
            extra(staged)
        old = site / f".{profile}-old"
        shutil.rmtree(old, ignore_errors=True)
        if (site / profile).exists():
            os.replace(site / profile, old)
        os.replace(staged, site / profile)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    (site / ".nojekyll").touch()  # serve folders starting with _ (Sphinx's _static)
    index = site / "index.html"
    files.write_atomic(index, index_page(site))
    return index


def index_page(site: Path) -> str:
    """A small page linking every profile's book under ``site``, with the commit and date each was built at."""
    entries = []
    for folder in sorted(
        p for p in site.iterdir() if p.is_dir() and (p / "index.html").is_file() and not p.name.startswith(".")
    ):
        try:
            stamp = json.loads((folder / STAMP).read_text())
        except (OSError, ValueError):
            stamp = {}
        built = (str(stamp.get("commit") or "?"), str(stamp.get("date", "?"))) if stamp else (None, None)
        entries.append(Entry(folder.name, DESCRIPTIONS.get(folder.name, "another profile"), *built))
    return profiles_page(entries)


def publish(
    profile: str,
    bundle_path: Path,
    site: Path,
    budget_minutes: float | None = None,
    repo_url: str | None = None,
    strict: bool = False,
    fetch: bool = False,
    results_root: Path = RESULTS_ROOT,
    html_dir: Path = HTML,
    build: Build = make,
    log: Callable[[str], None] = print,
    write_report: Report = report.write_report,
) -> int:
    """Restore, build (only stale chapters rerun), pack, print the report and place the site; the build's exit
    status."""
    if budget_minutes is not None and not budget_minutes > 0:
        raise ParameterError(
            f"--budget-minutes {budget_minutes} is not a positive number of minutes; give one, or "
            f"leave it out to rerun every stale chapter"
        )
    say = lambda line: log(f"publish: {line}")  # noqa: E731
    restore(bundle_path, profile, results_root, say)
    if fetch:
        fetch_datasets(say)
    args = make_args(profile, budget_minutes, repo_url, strict)
    say(f"make {' '.join(args)}")
    status = build(args)
    try:
        packed = bundle.pack(profile, bundle_path, results_root)
        say(f"packed {len(packed.units)} units and {packed.stored_runs} stored runs into {bundle_path}")
    except bundle.BundleError as err:
        say(f"nothing to pack ({err})")
    if status not in (0, 1):
        say(f"make book failed (exit {status}); the site is not updated")
        return status
    stale = [p for p in plan(profile, results_root=results_root) if p.reason is not None]
    if stale:
        say(
            f"{len(stale)} chapter(s) stale after this build (a deferred one's page says so; the next build reruns "
            f"them):\n" + format_plan(stale)
        )
    commit = results.git_commit()
    stamp = {
        "profile": profile,
        "commit": commit,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "not_current": [p.chapter for p in stale],
    }
    colab = colab_writer(repo_url, commit, say)
    print_report(profile, html_dir, results_root, write_report, say)

    def extra(folder: Path) -> None:
        index = published.write(folder / published.FOLDER, profile, results_root)
        say(f"{len(index['chapters'])} units in {published.FOLDER}/ beside the book (`make book` starts from them)")
        if colab is not None:
            colab(folder)

    say(f"site: {place_site(html_dir, site, profile, stamp, extra)}")
    return status


def print_report(profile: str, html_dir: Path, results_root: Path, write: Report, log: Callable[[str], None]) -> None:
    """The report beside the built book (``report.PDF_NAME``: the site then holds ``<site>/<profile>/report.pdf``);
    where it cannot be printed (no Chromium, no summary page), the log says why and the book is published without
    it."""
    try:
        done = write(profile, html_dir / report.PDF_NAME, html_dir, results_root)
    except (report.ReportError, report_print.PrintError, ParameterError) as err:
        log(f"no {report.PDF_NAME}: {err}")
        return
    log(f"{report.PDF_NAME}: {done['figures']} figures, printed in {done['seconds']} s")


def colab_writer(repo_url: str | None, commit: str | None, log: Callable[[str], None]) -> Callable[[Path], Any] | None:
    """What puts the Colab notebooks into a profile's new site folder (``<folder>/colab/``): nothing without a
    repository address or outside git (said in the log); a dirty checkout's notebooks install its HEAD commit."""
    if not repo_url or not commit:
        log("no Colab notebooks: " + ("no --repo-url" if not repo_url else "the checkout's commit is unknown"))
        return None
    head = commit.removesuffix("+dirty")
    if head != commit:
        log(f"the checkout differs from its commit {head[:12]}: the Colab notebooks install {head[:12]} as committed")

    def write(folder: Path) -> None:
        written = write_colab(folder / COLAB_DIR, repo_url, head)
        log(f"{len(written)} Colab notebooks in {COLAB_DIR}/, installing the companion at {head[:12]}")

    return write


def add_commands(sub: Any) -> None:
    """``publish`` on the command line's subparsers."""
    cmd = sub.add_parser(
        "publish",
        help="the publishing workflow: restore a profile's results, rebuild the book "
        "(only stale chapters), pack the results, place the site",
    )
    cmd.add_argument("--profile", required=True, choices=PROFILES)
    cmd.add_argument("--bundle", type=Path, required=True, help="the results bundle to restore from and write to")
    cmd.add_argument("--site", type=Path, required=True, help="the Pages folder: the book goes to SITE/<profile>/")
    cmd.add_argument(
        "--budget-minutes", type=float, metavar="M", help="start no stale chapter that would end the run past M minutes"
    )
    cmd.add_argument("--repo-url", help="the repository's web address (REPO_URL of make book)")
    cmd.add_argument("--strict", action="store_true", help="a chapter without its data fails the build")
    cmd.add_argument("--fetch", action="store_true", help="download the datasets first (best effort)")
    cmd.add_argument("--results", type=Path, default=RESULTS_ROOT, help="root of tidy results (<root>/<profile>)")


def command(args: Any) -> int:
    """Run ``publish``."""
    try:
        return publish(
            args.profile,
            args.bundle,
            args.site,
            args.budget_minutes,
            args.repo_url,
            args.strict,
            args.fetch,
            args.results,
        )
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
