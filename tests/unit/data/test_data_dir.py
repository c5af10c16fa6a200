"""The data-directory setting."""
import pytest

from pathlib import Path

from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.data import CACHE_ENV, DATA_ENV, DataError, cache_dir, data_dir
from qkov_lib.data.registry import data_state


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


def test_the_data_state_does_not_name_where_the_checkout_is(monkeypatch, tmp_path):
    """The fingerprint's data part names the default cache relative to the repository, so a moved checkout or an
    unpacked bundle keeps its real-data chapters current; an offline folder elsewhere is named as it is."""
    monkeypatch.delenv("QKOV_CACHE_DIR", raising=False)
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    (tmp_path / "sva").mkdir()
    state = data_state("sva")
    assert state[CACHE_ENV] == str(Path("data") / "cache") and state[DATA_ENV] == str(tmp_path.resolve())
    assert not any(key.startswith(str(REPO_ROOT)) for key in state["files"])
