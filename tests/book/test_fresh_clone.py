"""A fresh clone's `make book` against a site that `published.write` built from the smoke book, served on
127.0.0.1: it takes every chapter from the site, reruns none and renders every page; a one-line edit of one chapter's
module then reruns that chapter alone (and the pages that gather every chapter's results)."""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from qkov_lib.core.contents import GATHERERS, chapter_names
from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.data import DATA_ENV
from qkov_lib.runner import published


def fresh_clone(target: Path) -> Path:
    """The checkout's files as a clone has them (tracked, and untracked ones git does not ignore): no results, no
    executed chapters, no build, no environment."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        if (REPO_ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, target / name)
    return target


@pytest.fixture
def site(smoke_book, tmp_path):
    """The smoke book's units published under <site>/smoke/results/, served on 127.0.0.1."""
    root = tmp_path / "site"
    index = published.write(root / "smoke" / published.FOLDER, "smoke", smoke_book / "data" / "results")
    assert set(index["chapters"]) == set(chapter_names())
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def make_book(clone: Path, url: str, data: Path, *targets: str) -> subprocess.CompletedProcess:
    """`make book PROFILE=smoke` in the clone, in this environment (made already: `-o` keeps make from remaking
    it)."""
    venv = Path(sys.prefix)
    env = {**os.environ, published.RESULTS_URL_ENV: url, DATA_ENV: str(data), "PYTHONPATH": ""}
    return subprocess.run(
        ["make", "-o", str(venv / ".installed"), *targets, "PROFILE=smoke", f"VENV={venv}"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def test_a_fresh_clone_builds_the_published_book_and_reruns_only_an_edit(site, fake_data_dir, tmp_path):
    clone = fresh_clone(tmp_path / "clone")
    first = make_book(clone, site, fake_data_dir, "book")
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-3000:]
    total = len(chapter_names())
    assert re.search(rf"{total} of {total} chapters from the published results \(commit \w+\); 0 to run", out), out
    assert not re.search(r"running \w+ \(smoke\)", out), out
    pages = {p.stem for p in (clone / "_build" / "html" / "book" / "chapters").glob("*.html")}
    assert pages == set(chapter_names())
    module = clone / "qkov_lib" / "chapters" / "lemma3.py"  # no other chapter imports it
    module.write_text(module.read_text() + "\nEDITED = True\n")
    second = subprocess.run(
        [sys.executable, "-m", "qkov_lib", "reproduce", "--profile", "smoke"],
        cwd=clone,
        env={**os.environ, published.RESULTS_URL_ENV: site, DATA_ENV: str(fake_data_dir), "PYTHONPATH": ""},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    out = second.stdout + second.stderr
    assert second.returncode == 0, out[-3000:]
    ran = re.findall(r"running (\w+) \(smoke\): (.*)", out)
    assert ran[0] == ("lemma3", "code (qkov_lib.chapters.lemma3) changed"), out
    assert {name for name, _ in ran[1:]} <= set(GATHERERS), out  # they gather every chapter's results
