"""The data-directory setting."""
import pytest

from qkov_lib.data import DATA_ENV, DataError, cache_dir, data_dir


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
