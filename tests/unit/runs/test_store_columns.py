"""A stored run's constant text columns (a training curve's label on each row) are kept once in its metadata and
put back on reading: the tables read back equal, column order and types included, and the CSV is smaller."""

import io

import pandas as pd
import pytest

from qkov_lib.core.chapter import Scope, scoped
from qkov_lib.core.results import ROOT_ENV
from qkov_lib.runs import store, store_columns, store_verify
from qkov_lib.runs.store import Batch, Piece

LABEL = "(d) CACO, PyTorch init W_QK W_OV, cap 500,000, authors' stop per 200-step epoch"


def curve(rows: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"label": LABEL, "step": range(0, 50 * rows, 50), "seed": 0, "train_nll": [1 / (i + 3) for i in range(rows)]}
    )


def test_a_constant_text_column_is_kept_once_and_put_back_in_place():
    tables = {"curve": curve(200), "main": pd.DataFrame({"panel": ["a"], "x": [1.5]}), "words": curve(200)[["label"]]}
    kept, constants = store_columns.factor(tables)
    assert list(kept["curve"].columns) == ["step", "seed", "train_nll"]  # the int column "seed" stays: text only
    assert constants == {"curve": {"label": [0, LABEL]}}  # short "main" and one-column "words" keep theirs
    back = store_columns.restore(kept, {store_columns.META_KEY: constants})
    for name, frame in tables.items():
        pd.testing.assert_frame_equal(back[name], frame)


def test_a_stored_curve_reads_back_equal_and_smaller(tmp_path, monkeypatch):
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "results"))
    monkeypatch.setenv(store.ROOT_ENV, str(tmp_path / "store"))
    monkeypatch.setenv(store.WRITE_ENV, "1")
    computed = curve(1000)
    with scoped(Scope("tiny", "default")):
        batch = Batch([Piece("run-seed0", {"seed": 0})], ["qkov_lib.metrics.stats"])
        batch.compute(lambda: computed, [()], 1, lambda t, out: {0: {"curve": out}})
        first = batch.tables()[0]["curve"]
    with scoped(Scope("tiny", "default")):
        again = Batch([Piece("run-seed0", {"seed": 0})], ["qkov_lib.metrics.stats"]).tables()[0]["curve"]
    expected = pd.read_csv(io.StringIO(computed.to_csv(index=False)))  # as any table reads back
    pd.testing.assert_frame_equal(first, expected)
    pd.testing.assert_frame_equal(again, expected)
    folder = tmp_path / "store" / "default" / "tiny"
    assert LABEL not in (folder / "run-seed0.curve.csv").read_text()
    assert (folder / "run-seed0.curve.csv").stat().st_size < len(expected.to_csv(index=False)) / 3
    assert store_verify.verify(tmp_path / "store") == []


@pytest.mark.parametrize("meta", [{store_columns.META_KEY: {"curve": {"label": "garbled"}}}])
def test_garbled_metadata_reads_as_a_damaged_run(meta):
    with pytest.raises((ValueError, TypeError, KeyError, IndexError)):
        store_columns.restore({"curve": curve(200)}, meta)
