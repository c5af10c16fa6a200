"""The published results (qkov_lib/runner/published.py) against a real server on 127.0.0.1: a site written from a
run of two tiny chapters, served over HTTP. A fresh results folder takes both in and reruns nothing; an edited
chapter reruns alone; each way the site can be wrong (tampered, truncated, a lying index, an unknown chapter, a path
outside the layout, 404, 500, silence, a redirect elsewhere) is one line, leaves every local file as it was, and the
run then computes what it must."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
from fake_chapters import tiny_book

from qkov_lib.__main__ import main
from qkov_lib.core import results
from qkov_lib.core.chapter import Scope, scoped, stored_runs
from qkov_lib.runner import bundle, catalog, published, units
from qkov_lib.runs.store import Batch, Piece

PROFILE = "smoke"


class Site:
    """A folder served on 127.0.0.1; ``fault`` makes the handler misbehave (None: serve the files)."""

    def __init__(self, root: Path) -> None:
        self.root, self.fault = root, None
        site = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(site.root), **kwargs)

            def do_GET(self):  # noqa: N802 (http.server's name)
                if site.fault == "500":
                    self.send_error(500, "Internal Server Error")
                elif site.fault == "redirect":
                    self.send_response(302)
                    self.send_header("Location", f"http://127.0.0.2:{self.server.server_port}{self.path}")
                    self.end_headers()
                else:
                    super().do_GET()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def results(self) -> Path:
        return self.root / PROFILE / published.FOLDER

    def index(self) -> dict:
        return json.loads((self.results / published.INDEX).read_text())

    def rewrite_index(self, edit) -> None:
        index = self.index()
        edit(index)
        (self.results / published.INDEX).write_text(json.dumps(index))


def two_chapters(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny chapter as ``tiny`` and ``other`` in ``root/notebooks``, the runner's only chapters."""
    tiny_book(root, monkeypatch, ("tiny", "other"))
    monkeypatch.setattr(catalog, "CHAPTERS", {n: catalog.CHAPTERS[n] for n in ("tiny", "other")})


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Path:
    """The two tiny chapters run once for this module (``published/`` under the folder returned): each test takes a
    copy, so that no test waits for two kernels."""
    root = tmp_path_factory.mktemp("published")
    with pytest.MonkeyPatch.context() as monkeypatch:
        two_chapters(root, monkeypatch)
        assert cli(root, root / "published", "--no-fetch") == 0
    return root / "published"


@pytest.fixture
def book(tmp_path, monkeypatch, ran) -> Iterator[tuple[Path, Site]]:
    """Two tiny chapters run into ``published/`` (a copy of ``ran``), written as a site and served; an empty
    results folder and a folder beside it to take them into."""
    two_chapters(tmp_path, monkeypatch)
    shutil.copytree(ran, tmp_path / "published")
    site = Site(tmp_path / "site")
    published.write(site.results, PROFILE, tmp_path / "published")
    (tmp_path / "beside").mkdir()
    (tmp_path / "beside" / "other.json").write_text("{}\n")
    monkeypatch.setenv(published.RESULTS_URL_ENV, site.url)
    yield tmp_path, site
    site.server.shutdown()


def cli(root: Path, res: Path, *args: str) -> int:
    return main(["reproduce", "--profile", PROFILE, "--results", str(res), "--out", str(root / "nb"), *args])


def local(root: Path) -> dict[str, str]:
    """The sha256 of every file of the results folder and the folder beside it (lock files aside)."""
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for folder in (root / "res", root / "beside")
        for p in sorted(folder.rglob("*"))
        if p.is_file() and units.LOCKS not in p.parts
    }


def test_a_fresh_folder_takes_every_chapter_in_and_reruns_none(book, capsys):
    root, site = book
    capsys.readouterr()
    assert main(["reproduce", "--profile", PROFILE, "--results", str(root / "res"), "--out", str(root / "fresh")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"2 of 2 chapters from the published results \(commit \w+\); 0 to run", out), out
    assert not re.search(r"running \w+ \(smoke\)", out) and "2 restored" in out
    for chapter in ("tiny", "other"):  # the units are the published ones, bit for bit
        for path in (root / "published" / PROFILE).glob(f"{chapter}.*"):
            assert (root / "res" / PROFILE / path.name).read_bytes() == path.read_bytes()
    assert cli(root, root / "res") == 0
    assert "every chapter is current here already" in capsys.readouterr().out


def test_an_edited_chapter_reruns_alone(book, capsys):
    root, site = book
    source = catalog.NOTEBOOKS_DIR / "tiny.md"
    source.write_text(
        source.read_text().replace('x = overrides.get("x", 1)', 'x = overrides.get("x", 1)  # edited\ny = 2')
    )
    capsys.readouterr()
    assert cli(root, root / "res") == 0
    out = capsys.readouterr().out
    assert re.search(r"1 of 2 chapters from the published results \(commit \w+\); 1 to run, about 1 min", out), out
    assert "running tiny (smoke)" in out and "running other" not in out, out


def test_a_unit_current_here_is_never_replaced(book, capsys):
    root, site = book
    assert cli(root, root / "res", "--no-fetch") == 0  # computed here: current, with other bytes than the site's
    before = local(root)
    capsys.readouterr()
    assert cli(root, root / "res") == 0
    assert "every chapter is current here already" in capsys.readouterr().out and local(root) == before


def _repacked(site: Site, edit: Callable[[Path], None]) -> None:
    """tiny's archive unpacked, changed by ``edit`` (given the unpacked folder), packed again with a manifest that
    matches its files, and the index given the new archive's size and sha256."""
    import tarfile

    archive = site.results / "tiny.tar.gz"
    work = archive.parent / "work"
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")
    edit(work)
    manifest = json.loads((work / bundle.MANIFEST).read_text())
    for entry in manifest["files"]:
        path = work / entry["path"]
        entry["sha256"], entry["size"] = results.sha256_file(path), path.stat().st_size
    (work / bundle.MANIFEST).write_text(json.dumps(manifest))
    with tarfile.open(archive, "w:gz") as tar:
        for name in [bundle.MANIFEST] + [e["path"] for e in manifest["files"]]:
            tar.add(work / name, arcname=name)
    shutil.rmtree(work)
    site.rewrite_index(
        lambda ix: ix["chapters"]["tiny"].update(size=archive.stat().st_size, sha256=results.sha256_file(archive))
    )


def _tamper(site: Site) -> None:
    """Rewrite a file inside tiny's archive and give the index the new archive's size and sha256: only the unit's
    own seal can tell."""

    def edit(work: Path) -> None:
        csv = next(work.rglob("tiny.csv"))
        csv.write_text(csv.read_text().replace("1", "7"))

    _repacked(site, edit)


def _names_beside(site: Site) -> None:
    """tiny's sealed metadata made to list a file beside the results folder (its sha256 right), the archive and the
    index matching it: only the name can tell, and nothing beside the results may move."""

    def edit(work: Path) -> None:
        meta_path = next(work.rglob("tiny.json"))
        meta = json.loads(meta_path.read_text())
        meta["files"]["../../../beside/other.json"] = hashlib.sha256(b"{}\n").hexdigest()
        meta.pop(results.SEAL)
        meta_path.write_text(json.dumps({**meta, results.SEAL: results._seal(meta)}))

    _repacked(site, edit)


def _no_unit(site: Site) -> None:
    """tiny's archive rewritten as a well-formed bundle that holds no unit at all (nothing to accept), the index
    matching it: nothing is taken, and the count does not say otherwise."""
    import io
    import tarfile

    archive = site.results / "tiny.tar.gz"
    with tarfile.open(archive) as tar:
        manifest = json.loads(tar.extractfile(bundle.MANIFEST).read())
    text = json.dumps({**manifest, "files": []}).encode()
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo(bundle.MANIFEST)
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    site.rewrite_index(
        lambda ix: ix["chapters"]["tiny"].update(size=archive.stat().st_size, sha256=results.sha256_file(archive))
    )


def _truncate(site: Site) -> None:
    archive = site.results / "tiny.tar.gz"
    archive.write_bytes(archive.read_bytes()[:-40])


class _Silent:
    """A server that takes the connection and never answers."""

    def __enter__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *args):
        self.sock.close()


EVERY = "; every stale chapter runs here"
SITE_FAULTS = [
    (
        "a tampered bundle",
        _tamper,
        r"published tiny not used: .*tiny\.tar\.gz holds smoke/tiny\.csv, which its unit's "
        r"metadata does not list \(or lists with another sha256\).*",
    ),
    (
        "a unit naming a file beside the results",
        _names_beside,
        r"published tiny not used: .*tiny\.tar\.gz's unit tiny fails its own check \(.*tiny\.json names "
        r"'\.\./\.\./\.\./beside/other\.json' as one of its files, .*",
    ),
    ("an archive without its unit", _no_unit, r"published tiny not used: its archive holds no unit of tiny"),
    (
        "a truncated download",
        _truncate,
        r"published tiny not used: .*/tiny\.tar\.gz ended after \d+ of its \d+ bytes "
        r"\(truncated\); not used",
    ),
    (
        "an index with a wrong sha256",
        lambda s: s.rewrite_index(lambda ix: ix["chapters"]["tiny"].update(sha256="0" * 64)),
        r"published tiny not used: .*/tiny\.tar\.gz differs from its published sha256 \(damaged or altered\); "
        r"not used",
    ),
    (
        "an index naming an unknown chapter",
        lambda s: s.rewrite_index(
            lambda ix: ix["chapters"].update(nope=dict(ix["chapters"]["tiny"], file="nope.tar.gz"))
        ),
        r"published results not used: .*index\.json names chapter 'nope', which this book has not; refusing the index"
        + EVERY,
    ),
    (
        "an index naming a path outside the layout",
        lambda s: s.rewrite_index(lambda ix: ix["chapters"]["tiny"].update(file="../../escape.tar.gz")),
        r"published results not used: .*index\.json names a file outside the published "
        r"layout for tiny \('\.\./\.\./escape\.tar\.gz'\); refusing the index" + EVERY,
    ),
    (
        "a deeply nested index",
        lambda s: (s.results / published.INDEX).write_text("[" * 200_000 + "]" * 200_000),
        r"published results not used: .*index\.json is not JSON this library can read; not a published index" + EVERY,
    ),
    (
        "an index with a malformed field",
        lambda s: s.rewrite_index(lambda ix: ix["chapters"]["tiny"].update(wall_time_s="soon")),
        r"published results not used: .*index\.json gives tiny a malformed wall_time_s \('soon'\); refusing the index"
        + EVERY,
    ),
    (
        "an index with a malformed fingerprint",
        lambda s: s.rewrite_index(lambda ix: ix["chapters"]["tiny"]["fingerprint"].update(code=[1, 2])),
        r"published results not used: .*index\.json gives tiny a malformed fingerprint; refusing the index" + EVERY,
    ),
    (
        "a lying index",
        lambda s: s.rewrite_index(lambda ix: ix["chapters"]["tiny"]["fingerprint"].update(parameters="0" * 64)),
        None,
    ),
    (
        "a 404",
        lambda s: (s.results / published.INDEX).unlink(),
        r"published results not used: .*/smoke/results/index\.json: HTTP 404 File not found" + EVERY,
    ),
    (
        "a 500",
        lambda s: setattr(s, "fault", "500"),
        r"published results not used: .*index\.json: HTTP 500 Internal Server Error" + EVERY,
    ),
    (
        "a redirect to another host",
        lambda s: setattr(s, "fault", "redirect"),
        r"published results not used: .*index\.json redirects to another host \(http://127\.0\.0\.2:\d+\); refusing it"
        + EVERY,
    ),
]


@pytest.mark.parametrize("damage,message", [c[1:] for c in SITE_FAULTS], ids=[c[0] for c in SITE_FAULTS])
def test_a_site_that_is_wrong_is_one_line_and_changes_nothing(book, monkeypatch, capsys, damage, message):
    root, site = book
    (root / "res" / PROFILE).mkdir(parents=True)
    (root / "res" / PROFILE / "keep.txt").write_text("mine\n")
    damage(site)
    before = local(root)
    lines: list[str] = []
    fetched = published.fetch(
        PROFILE, ["tiny", "other"], {"tiny": {}, "other": {}}, root / "res", site.url, timeout=2, say=lines.append
    )
    assert "tiny" not in fetched.taken
    if message is None:  # an index whose fingerprint for tiny is not this checkout's: tiny is simply not taken
        assert fetched.taken == ["other"] and "tiny" in fetched.to_run
    else:
        problems = [line for line in lines if "not used" in line]
        assert len(problems) == 1 and re.fullmatch(message, problems[0]), lines
        if message.startswith("published tiny"):  # the unit matched and was refused: the outcome says so
            assert fetched.refused == ["tiny"] and "1 refused (said above)" in lines[-1], lines
        assert {k: v for k, v in local(root).items() if "/other." not in k} == {
            k: v for k, v in before.items() if "/other." not in k
        }
    site.fault = None
    capsys.readouterr()
    assert cli(root, root / "res", "--no-fetch") == 0  # the run computes what it must
    assert "running tiny (smoke)" in capsys.readouterr().out


def test_a_server_that_never_answers_is_a_timeout_not_a_hang(book, capsys):
    root, site = book
    lines: list[str] = []
    with _Silent() as url:
        done = published.fetch(
            PROFILE, ["tiny", "other"], {"tiny": {}, "other": {}}, root / "res", url, timeout=1, say=lines.append
        )
    assert done.taken == [] and len(lines) == 1
    assert re.fullmatch(
        r"published results not used: http://127\.0\.0\.1:\d+/smoke/results/index\.json (did not "
        r"answer within 1 s|stopped answering) \(.*\); every stale chapter runs here",
        lines[0],
    ), lines
    assert not (root / "res").exists()


def test_an_unreachable_site_and_no_site_are_one_line(book, monkeypatch, capsys):
    root, site = book
    site.server.shutdown()
    site.server.server_close()
    capsys.readouterr()
    assert cli(root, root / "res") == 0
    out = capsys.readouterr().out
    assert re.search(
        r"published results not used: http://127\.0\.0\.1:\d+/smoke/results/index\.json is unreachable "
        r"\(.*\); every stale chapter runs here",
        out,
    ), out
    assert "running tiny" in out
    monkeypatch.delenv(published.RESULTS_URL_ENV)
    monkeypatch.setattr(published, "origin_url", lambda: "/some/local/clone")
    assert cli(root, root / "res2") == 0
    assert (
        "no published results to start from: QKOV_RESULTS_URL is unset and the checkout's origin "
        "(/some/local/clone) is not a GitHub repository; every stale chapter runs here"
    ) in capsys.readouterr().out
    monkeypatch.setenv(published.RESULTS_URL_ENV, "")
    assert cli(root, root / "res3") == 0
    assert "published" not in capsys.readouterr().out  # turned off: not a word


@pytest.mark.parametrize(
    "remote,url",
    [
        ("https://github.com/Example-Owner/qkov-companion.git", "https://example-owner.github.io/qkov-companion"),
        ("git@github.com:someone/qkov.git", "https://someone.github.io/qkov"),
        ("https://github.com/someone/someone.github.io", "https://someone.github.io"),
        ("https://gitlab.com/someone/qkov.git", None),
        (None, None),
    ],
)
def test_the_default_site_is_the_origins_pages_address(remote, url):
    assert published.pages_url(remote) == url


def test_a_profile_set_beside_that_is_not_published_leaves_the_rest_taken(tmp_path, monkeypatch):
    """A page that sets another profile's results beside its own (``BESIDE``) depends on that profile's unit; the
    site lacks that profile's index: one line, and this profile's units are still taken."""
    tiny_book(tmp_path, monkeypatch, ("tiny",))
    monkeypatch.setattr(catalog, "CHAPTERS", {"tiny": catalog.CHAPTERS["tiny"]})
    monkeypatch.setattr(catalog.CHAPTERS["tiny"], "BESIDE", ("official",), raising=False)
    assert cli(tmp_path, tmp_path / "published", "--no-fetch") == 0
    site = Site(tmp_path / "site")
    published.write(site.results, PROFILE, tmp_path / "published")
    lines: list[str] = []
    try:
        done = published.fetch(PROFILE, ["tiny"], {"tiny": {}}, tmp_path / "res", site.url, say=lines.append)
    finally:
        site.server.shutdown()
    assert done.taken == ["tiny"], lines
    assert re.fullmatch(
        r"published official results, which the smoke pages set beside their own, not used: "
        r".*/official/results/index\.json: HTTP 404 File not found",
        lines[0],
    ), lines
    assert lines[1].startswith("1 of 1 chapters from the published results")


def test_the_outcome_of_refused_units_names_them_not_a_mismatch():
    """Every matching unit refused (damaged): the line says how many were refused, not that none matched."""
    done = published.Fetched(refused=["tiny"], to_run={"tiny": 60.0}, commit="abc1234def")
    line = published._outcome(done, 1, "http://127.0.0.1:1")
    assert line == (
        "0 of 1 chapters from the published results at http://127.0.0.1:1 (commit abc1234); 1 refused (said above); "
        "1 to run, about 1 min (from their published wall times)"
    )
    assert "match none" not in line


def test_a_stale_page_still_hands_over_its_stored_runs(book, monkeypatch, capsys):
    """The published tiny unit carries a stored run; once tiny's page is edited here, the unit is stale, yet its run
    is taken into the scratch store (where the chapter's batch finds it under the same key) and the line says so."""
    root, site = book
    monkeypatch.setenv(results.ROOT_ENV, str(root / "published"))
    monkeypatch.setenv("QKOV_STORE_ROOT", str(root / "committed"))
    with scoped(Scope("tiny", PROFILE)) as scope:
        batch = Batch([Piece("run-seed0", {"seed": 0})], ["qkov_lib.metrics.stats"])
        batch.compute(lambda: {"main": None}, [()], 1, lambda t, out: {0: {"main": pd.DataFrame({"v": [1 / 3]})}})
    folder = root / "published" / PROFILE
    meta = results.read_meta(folder, "tiny")
    results.write_meta(folder, "tiny", {**meta, "stored_runs": stored_runs(scope.used)})
    published.write(site.results, PROFILE, root / "published")
    assert site.index()["chapters"]["tiny"]["stored_runs"] == 1
    source = catalog.NOTEBOOKS_DIR / "tiny.md"
    source.write_text(source.read_text().replace('x = overrides.get("x", 1)', 'x = overrides.get("x", 1)  # edited'))
    monkeypatch.setenv(results.ROOT_ENV, str(root / "res"))
    capsys.readouterr()
    assert cli(root, root / "res") == 0
    out = capsys.readouterr().out
    assert "1 of 2 chapters from the published results" in out and "1 stored runs taken for 1 of the chapters" in out
    assert "running tiny (smoke)" in out, out
    assert len(list((root / "res" / "store" / PROFILE / "tiny").glob("run-seed0-*.json"))) == 1
    with scoped(Scope("tiny", PROFILE)):  # the batch here finds it: nothing to compute
        assert Batch([Piece("run-seed0", {"seed": 0})], ["qkov_lib.metrics.stats"]).missing == []


class _Trickle:
    """A server that announces ``length`` bytes and sends one every 0.2 s (for 20 s at most), like a site that
    slows to a crawl."""

    def __init__(self, length: int) -> None:
        self.length, self.sock = length, socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/smoke/results/tiny.tar.gz"

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {self.length}\r\n\r\n".encode())
            try:
                for _ in range(min(self.length, 100)):
                    conn.sendall(b"x")
                    time.sleep(0.2)
            except OSError:  # the client gave up
                pass


def test_a_site_that_trickles_bytes_meets_the_whole_downloads_deadline(tmp_path):
    """2,000 bytes are allowed 1 s plus 2,000 bytes at the slowest rate (0.1 s): the download gives up then, not
    when 64 KiB have trickled in (never, at this rate). A length announced past the index's is refused at once."""
    entry = {"size": 2000, "sha256": "0" * 64}
    trickle = _Trickle(2000)
    started = time.monotonic()
    with pytest.raises(published.FetchError, match=r"tiny\.tar\.gz came too slowly \(not whole within 1 s\)"):
        published.download(trickle.url, tmp_path / "tiny.tar.gz", entry, timeout=1)
    assert time.monotonic() - started < 15  # the server would go on for 20 s
    trickle.sock.close()
    big = _Trickle(10**9)
    with pytest.raises(published.FetchError, match=r"larger than the 2000 bytes it should be \(1000000000\)"):
        published.download(big.url, tmp_path / "tiny.tar.gz", entry, timeout=1)
    big.sock.close()
