"""The publishing workflow's script (qkov_lib/runner/publish.py) on a fake book of two tiny chapters: the first build starts
fresh; a fresh runner with the bundle reruns nothing; a damaged bundle means starting fresh; a build past its time
budget publishes the finished chapters and the cached rest, saying so; the profiles' books sit side by side under
one site with an index page. ``make book`` is replaced by the runner called in-process (no real chapter runs)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import nbformat
import pytest
from fake_chapters import tiny_book

from qkov_lib.__main__ import main
from qkov_lib.core import results
from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.runner import bundle, bundle_check, publish, published
from qkov_lib.runner import reproduce as runner
from qkov_lib.runner import catalog, execute
from qkov_lib.runner.book_ext import mark_older


class FakeBook:
    """Two tiny chapters as the whole book, and a ``make book`` that runs them with the runner into ``runner/``
    (a fresh runner: ``new_runner``) and writes a page per chapter into ``runner/html``."""

    def __init__(self, root: Path) -> None:
        self.root, self.runs = root, []
        self.new_runner()

    def new_runner(self) -> None:
        self.machine = self.root / f"runner{len(self.runs)}"
        self.res, self.nb, self.html = self.machine / "res", self.machine / "nb", self.machine / "html"

    def make(self, args: Sequence[str]) -> int:
        options = dict(a.split("=", 1) for a in args[1:])
        assert args[0] == "book"
        budget = float(options["BUDGET"]) if "BUDGET" in options else None
        summary = runner.reproduce(options["PROFILE"], out_dir=self.nb, results_root=self.res, budget_minutes=budget)
        self.runs.append(summary)
        for chapter in ("tiny", "other"):
            page = self.html / "book" / "chapters" / f"{chapter}.html"
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(nbformat.read(self.nb / f"{chapter}.ipynb", as_version=4).cells[0].source)
        (self.html / "index.html").write_text("<h1>the book</h1>")
        return 1 if summary.failures else 0

    def publish(self, bundle_path: Path, site: Path, log: list[str], **kw) -> int:
        return publish.publish(
            "default",
            bundle_path,
            site,
            results_root=self.res,
            html_dir=self.html,
            build=self.make,
            log=log.append,
            **kw,
        )


@pytest.fixture
def book(tmp_path, monkeypatch) -> FakeBook:
    tiny_book(tmp_path, monkeypatch, ("tiny", "other"))
    monkeypatch.setattr(catalog, "CHAPTERS", {n: catalog.CHAPTERS[n] for n in ("tiny", "other")})  # the whole book
    monkeypatch.setattr(catalog, "chapter_names", lambda: ["tiny", "other"])  # the whole book
    return FakeBook(tmp_path)


def bundle_files(path: Path) -> dict[str, str]:
    return {f["path"]: f["sha256"] for f in bundle_check.read(path)["files"]}


def test_first_build_starts_fresh_and_a_new_runner_reruns_nothing(book, tmp_path):
    archive, site, log = tmp_path / "cache" / "results-default.tar.gz", tmp_path / "site", []
    assert book.publish(archive, site, log) == 0
    assert (
        f"publish: no results bundle at {archive}: starting fresh (every chapter without current results in "
        f"{book.res} runs)" in log
    )
    assert book.runs[-1].done == {"ran": ["tiny", "other"]}
    first = bundle_files(archive)
    assert sorted(first) == sorted(
        f"default/{c}.{e}" for c in ("tiny", "other") for e in ("csv", "claims.csv", "ipynb", "json")
    )
    book.new_runner()  # the next push: a fresh machine, the bundle from the cache
    log.clear()
    assert book.publish(archive, site, log) == 0
    assert any(line.startswith("publish: restored 2 units of default and 0 stored runs from") for line in log)
    assert book.runs[-1].done == {"restored": ["tiny", "other"]}  # nothing reran; the pages copied from the units
    assert bundle_files(archive) == first
    assert not any("stale after this build" in line for line in log)
    assert "<h1>the book</h1>" == (site / "default" / "index.html").read_text()
    index = json.loads((site / "default" / published.FOLDER / published.INDEX).read_text())  # what clones start from
    assert sorted(index["chapters"]) == ["other", "tiny"]
    assert "publish: 2 units in results/ beside the book" in " ".join(log)
    for chapter, entry in index["chapters"].items():
        archive = site / "default" / published.FOLDER / entry["file"]
        assert (
            results.sha256_file(archive) == entry["sha256"]
            and entry["fingerprint"] == results.read_meta(book.res / "default", chapter)["fingerprint"]
        )
        assert sorted(bundle_files(archive)) == sorted(
            f"default/{chapter}.{e}" for e in ("csv", "claims.csv", "ipynb", "json")
        )


def test_a_damaged_bundle_means_starting_fresh(book, tmp_path):
    archive, site, log = tmp_path / "results-default.tar.gz", tmp_path / "site", []
    book.publish(archive, site, log)
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    book.new_runner()
    log.clear()
    assert book.publish(archive, site, log) == 0
    assert any(
        line.startswith(f"publish: the results bundle cannot be used ({archive} is ")
        and line.endswith(f"): starting fresh (every chapter without current results in {book.res} runs)")
        for line in log
    )
    assert book.runs[-1].done == {"ran": ["tiny", "other"]}
    bundle_check.read(archive)  # packed again, whole


def test_a_build_past_its_budget_publishes_what_finished_and_the_cached_rest(book, tmp_path):
    """tiny's last run took 10 minutes; after an edit to both chapters and with a 5-minute budget, other reruns,
    tiny is not started: its page is its last unit with a line saying so, the log lists it, the bundle keeps it."""
    archive, site, log = tmp_path / "results-default.tar.gz", tmp_path / "site", []
    book.publish(archive, site, log)
    meta = results.read_meta(book.res / "default", "tiny")
    meta["runner_wall_time_s"] = 600.0
    results.write_meta(book.res / "default", "tiny", meta)
    bundle.pack("default", archive, book.res)
    for chapter in ("tiny", "other"):
        source = catalog.NOTEBOOKS_DIR / f"{chapter}.md"
        source.write_text(source.read_text() + "\nA new sentence.\n")
    book.new_runner()
    log.clear()
    assert book.publish(archive, site, log, budget_minutes=5) == 0
    assert "publish: make book PROFILE=default BUDGET=5" in log
    assert book.runs[-1].done == {"deferred": ["tiny"], "ran": ["other"]}
    stale = next(line for line in log if "stale after this build" in line)
    assert re.search(r"\ntiny +stale +10\.0 min +source changed\n", stale) and "other " not in stale
    page = (site / "default" / "book" / "chapters" / "tiny.html").read_text()
    assert "Not rerun in this build, for want of time (source changed)" in page
    assert "*This page was run with profile `default`" in page
    assert "Not rerun" not in (site / "default" / "book" / "chapters" / "other.html").read_text()
    assert bundle_files(archive)["default/tiny.json"] == results.sha256_file(book.res / "default" / "tiny.json")
    assert json.loads((site / "default" / publish.STAMP).read_text())["not_current"] == ["tiny"]


def test_profiles_sit_side_by_side_under_one_site(book, tmp_path):
    site = tmp_path / "site"
    (site / "paper").mkdir(parents=True)  # the GPU job's last build, restored from its cache
    (site / "paper" / "index.html").write_text("the paper book")
    (site / "paper" / publish.STAMP).write_text(json.dumps({"commit": "c0ffee" * 6, "date": "2026-01-02"}))
    (site / "official").mkdir()  # the official job's last build, restored from its cache
    (site / "official" / "index.html").write_text("the official book")
    book.publish(tmp_path / "b.tar.gz", site, [])
    index = (site / "index.html").read_text()
    links = re.findall(r'<a href="(\w+)/index.html"><strong>(\w+)</strong></a>', index)
    assert links == [("default", "default"), ("official", "official"), ("paper", "paper")]
    assert "rebuilt after the default book on every push to main" in index  # official, on the hosted runner
    assert "<code>c0ffeec0ffee</code> on 2026-01-02" in index
    assert (site / "paper" / "index.html").read_text() == "the paper book" and (site / ".nojekyll").exists()
    assert not [p for p in site.iterdir() if p.name.startswith(".") and p.name != ".nojekyll"]


def test_a_failed_build_still_packs_what_finished(book, tmp_path):
    archive, site, log = tmp_path / "b.tar.gz", tmp_path / "site", []

    def failing(args: Sequence[str]) -> int:
        book.make(args)
        return 1  # a chapter failed: make renders the book and exits 1

    assert (
        publish.publish(
            "default", archive, site, results_root=book.res, html_dir=book.html, build=failing, log=log.append
        )
        == 1
    )
    assert len(bundle_files(archive)) == 8 and (site / "default" / "index.html").exists()
    book.new_runner()

    def broken(args: Sequence[str]) -> int:
        return 2  # the book build itself failed: the site keeps its last build

    (site / "default" / "index.html").write_text("last good build")
    assert (
        publish.publish(
            "default", archive, site, results_root=book.res, html_dir=book.html, build=broken, log=log.append
        )
        == 2
    )
    assert (site / "default" / "index.html").read_text() == "last good build"
    assert "publish: make book failed (exit 2); the site is not updated" in log


def test_a_bad_budget_is_one_error(tmp_path, capsys):
    assert (
        main(
            [
                "publish",
                "--profile",
                "default",
                "--bundle",
                str(tmp_path / "b.tar.gz"),
                "--site",
                str(tmp_path / "site"),
                "--budget-minutes",
                "-5",
            ]
        )
        == 2
    )
    assert "--budget-minutes -5.0 is not a positive number of minutes" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_make_book_passes_the_budget_to_the_runner(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed").touch()

    def command(*settings: str) -> str:
        """What `make -n book` would run with these settings, on one line (continuations joined)."""
        argv = ["make", "-n", "-o", str(venv / ".installed"), "book", *settings, f"VENV={venv}"]
        out = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
        return " ".join(out.replace("\\\n", " ").split())

    assert "-m qkov_lib reproduce --profile default --budget-minutes 300;" in command("PROFILE=default", "BUDGET=300")
    assert "-m qkov_lib reproduce --profile official --stored-only;" in command("PROFILE=official", "STORED_ONLY=1")
    assert publish.make_args("paper", 660, "https://github.com/o/r", True) == [
        "book",
        "PROFILE=paper",
        "BUDGET=660",
        "REPO_URL=https://github.com/o/r",
        "STRICT=1",
    ]


def test_a_page_computed_at_an_older_commit_says_where_the_book_is():
    """The banner (reproduce.banner) as Sphinx renders it: the book's commit is added when it differs."""
    banner = execute.banner({"profile": "default", "git_commit": "0123456789abcdef" * 2 + "01234567"})
    assert "commit `0123456789ab`" in banner
    body = (
        '<p><em>This page was run with profile <code class="docutils literal notranslate"><span class="pre">'
        'default</span></code> · commit <code class="docutils literal notranslate"><span class="pre">0123456789ab'
        "</span></code>.</em></p>"
    )
    assert mark_older(body, "0123456789abcdef" * 2 + "01234567") == body
    older = mark_older(body, "fedcba9876543210" * 2 + "01234567")
    assert (
        '0123456789ab</span></code> (the book is at <code class="docutils literal notranslate"><span '
        'class="pre">fedcba987654</span></code>).' in older
    )


def test_the_book_rebuilds_every_page_only_when_more_than_a_notebook_changed(tmp_path):
    """book.build_book passes --all to jupyter-book only when the configuration, the table of contents, the book's
    own pages, its style sheet or the extension changed since the last build that succeeded (at least as strictly);
    the copies of plotly.js and MathJax each build writes into book/_static do not count."""
    from qkov_lib.runner.book import book_inputs, needs_full_build

    root = tmp_path / "tree"
    for name in ("_config.yml", "_toc.yml", "book/intro.md", "book/chapters/tiny.ipynb", "book/_static/qkov.css"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    config, stamp = root / "_config.yml", root / "_build" / "stamp.json"
    inputs = book_inputs(root, config)
    assert needs_full_build(stamp, inputs, strict=True)  # never built
    stamp.parent.mkdir()
    stamp.write_text(json.dumps({"inputs": inputs, "strict": True}))
    assert not needs_full_build(stamp, inputs, strict=True) and not needs_full_build(stamp, inputs, strict=False)
    (root / "book" / "chapters" / "tiny.ipynb").write_text("rerun")  # Sphinx rereads it by itself
    (root / "book" / "_static" / "plotly.min.js").write_text("copied by the build")
    (root / "book" / "_static" / "mathjax" / "MathJax.js").parent.mkdir()
    (root / "book" / "_static" / "mathjax" / "MathJax.js").write_text("copied by the build")
    assert book_inputs(root, config) == inputs
    (root / "book" / "_static" / "qkov.css").write_text("restyled")  # Sphinx copies it only when it writes pages
    assert needs_full_build(stamp, book_inputs(root, config), strict=True)
    (root / "book" / "_static" / "qkov.css").write_text("book/_static/qkov.css")
    (root / "book" / "intro.md").write_text("reworded")
    assert needs_full_build(stamp, book_inputs(root, config), strict=True)
    stamp.write_text(json.dumps({"inputs": inputs, "strict": False}))
    assert needs_full_build(stamp, inputs, strict=True)  # its warnings were not errors: build every page strictly
    stamp.write_text("{damaged")
    assert needs_full_build(stamp, inputs, strict=False)
