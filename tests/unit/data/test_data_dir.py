"""The data-directory setting, and what a dataset's identity is."""

import shutil

import pytest
from fake_data import write_sva_canonical, write_sva_offline

from qkov_lib.data import CACHE_ENV, DATA_ENV, DataError, cache_dir, data_dir
from qkov_lib.data.registry import DataUnavailable, canonical_file, data_identity


def test_unset_means_no_offline_copies(monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    assert data_dir() is None


def test_points_at_a_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert data_dir() == tmp_path


def test_missing_folder_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match="QKOV_DATA_DIR=.* is not a folder"):
        data_dir()


def test_cache_dir_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("QKOV_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path


def test_the_data_identity_is_its_content_not_where_it_lies(monkeypatch, tmp_path):
    """A dataset's identity (the fingerprint's data part) is its release and its files' sha256, named within the
    release: a copy moved to another folder is the same data; other bytes are not; nothing here is no release."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(DATA_ENV, raising=False)
    assert data_identity("sva") == {"release": None, "files": {}}
    first, second = tmp_path / "a", tmp_path / "b"
    write_sva_offline(first)
    shutil.copytree(first, second)
    identities = []
    for root in (first, second):
        monkeypatch.setenv(DATA_ENV, str(root))
        identities.append(data_identity("sva"))
    assert identities[0] == identities[1] and identities[0]["release"] == "offline"
    assert not any(str(tmp_path) in key for key in identities[0]["files"])
    path = second / "sva" / "rnn_agr_simple" / "numpred.val"
    path.write_text(path.read_text().replace("VBZ", "VBP", 1))
    assert data_identity("sva") != identities[0]
    monkeypatch.delenv(DATA_ENV)
    write_sva_canonical(tmp_path / "cache")
    assert data_identity("sva")["release"] == "canonical"


def test_no_download_is_tried_while_the_data_folder_is_set(monkeypatch, tmp_path):
    """With $QKOV_DATA_DIR set but holding none of a dataset's files, its canonical release is not downloaded beside
    the checkout: one error naming the setting, and no folder is made in the cache."""
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(
        DataUnavailable,
        match=r"hatexplain data not available \(QKOV_DATA_DIR=.* holds none of its "
        r"files, and no download is tried while QKOV_DATA_DIR is set\)",
    ):
        canonical_file("hatexplain", "dataset.json", download=True)
    assert not (tmp_path / "cache").exists()
