"""Stored files read back safely (``qkov_lib.core.files``): a file name read from a metadata becomes a path only as
one plain name inside its folder (``plain_name``), so a sealed metadata listing ``../README.md`` is refused before
anything outside is read; the runner's files written atomically keep the umask's mode."""

import json
import os

import pandas as pd
import pytest

from qkov_lib.core import files, results


@pytest.mark.parametrize(
    "name", ["../README.md", "..", ".", "", "/etc/passwd", "a/b.csv", "a\\b.csv", "C:x.csv", "x\0.csv", None, 3]
)
def test_a_name_that_is_no_plain_name_is_refused_naming_the_file_and_the_name(tmp_path, name):
    with pytest.raises(files.UnsafeName, match=r"meta\.json names .* as one of its files, which is not a plain"):
        files.plain_name(name, tmp_path, tmp_path / "meta.json")


def test_a_plain_name_is_its_path_and_a_link_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "outside.txt").write_text("precious\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    assert files.plain_name("run-0.csv", folder, "x") == folder / "run-0.csv"
    (folder / "link.csv").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(files.UnsafeName, match=r"'link\.csv'"):
        files.plain_name("link.csv", folder, "x")


def _forge(folder, chapter, **change):
    """Reseal ``chapter``'s metadata after ``change`` (a valid seal over a hostile body)."""
    meta = results.read_meta(folder, chapter)
    results.write_meta(folder, chapter, {**meta, **change})


def test_a_sealed_metadata_listing_a_file_outside_its_folder_is_refused_before_reading_it(tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text("the checkout's README\n")
    folder = tmp_path / "data" / "results"
    results.save(folder, "run", {"main": pd.DataFrame({"x": [1]})}, {})
    listed = results.read_meta(folder, "run")["files"]
    _forge(folder, "run", files={**listed, "../../README.md": results.sha256_file(tmp_path / "README.md")})
    read: list[str] = []
    real = results.sha256_file
    monkeypatch.setattr(results, "sha256_file", lambda path: read.append(str(path)) or real(path))
    with pytest.raises(files.UnsafeName, match=r"run\.json names '\.\./\.\./README\.md' as one of its files"):
        files.check(folder, "run")
    with pytest.raises(files.UnsafeName):
        files.load(folder, "run")
    assert not any("README" in p for p in read)


def test_a_table_name_that_escapes_its_folder_is_refused(tmp_path):
    results.save(tmp_path, "run", {"main": pd.DataFrame({"x": [1]})}, {})
    _forge(tmp_path, "run", tables=["main", "/../../elsewhere"])
    with pytest.raises(files.UnsafeName, match=r"'run\./\.\./\.\./elsewhere\.csv'"):
        files.load(tmp_path, "run")


@pytest.mark.parametrize("body", ["[]", '"text"', '{"files": ["a.csv"]}'])
def test_a_metadata_that_is_no_json_object_is_one_results_error(tmp_path, body):
    (tmp_path / "run.json").write_text(body)
    with pytest.raises(results.ResultsError, match=r"run\.json is no results' metadata"):
        files.check(tmp_path, "run")


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_a_file_written_atomically_keeps_the_umasks_mode(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        files.write_atomic(tmp_path / "a.json", json.dumps({}))
    finally:
        os.umask(old)
    for path in (tmp_path / "a.json",):
        assert path.stat().st_mode & 0o777 == mode, path
