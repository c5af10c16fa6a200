"""A real-data page made from the store without its dataset (``runs.real_facts``, ``runs.store_data``,
``store.lookup``'s ``unseen``), and a listing of its runs that reads no data."""

import io
import shutil

import pandas as pd
import pytest
import torch
from fake_data import write_hatexplain_offline

from qkov_lib.chapters import hatexplain as chapter
from qkov_lib.core.budget import DEADLINE_ENV
from qkov_lib.core.chapter import Scope, scoped, stored_runs
from qkov_lib.core.results import RESULTS_ENV, ROOT_ENV
from qkov_lib.data import CACHE_ENV, DATA_ENV
from qkov_lib.data.registry import DataUnavailable
from qkov_lib.metrics.stats import Majority
from qkov_lib.runner.catalog import resolve
from qkov_lib.runner.execute import banner
from qkov_lib.runs import real_facts, store, store_data
from qkov_lib.runs.real_setup import Prepared

CPU = torch.device("cpu")


@pytest.fixture
def stored(tmp_path, monkeypatch):
    """The smoke HateXplain chapter computed into a committed store of the test's own (under `default`'s name),
    on fake offline data; returns its setup, its run and the data folder."""
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "data"))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "results"))
    monkeypatch.setenv(store.ROOT_ENV, str(tmp_path / "store"))
    monkeypatch.setenv(store.WRITE_ENV, "1")
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    write_hatexplain_offline(tmp_path / "data")
    setup = resolve("hatexplain", "smoke", {"download": False})[1]
    with scoped(Scope("hatexplain", "default", chapter.DATASETS, True)):
        run = chapter.run(setup, device=CPU, progress=False)
    return setup, run, tmp_path / "data"


def test_the_facts_are_what_the_page_reads_of_the_data_and_read_back_whole():
    info = {"source": "offline", "posts": {"train": 3, "test": 2}, "share": "62.3%"}
    facts = real_facts.DataFacts(info, Majority(7, 11), 30, None, {"1": 2.5, "4": 6.824})
    back = real_facts.from_table(pd.read_csv(io.StringIO(real_facts.as_table(facts).to_csv(index=False))))
    assert back == facts and list(back.info) == list(info)  # the provenance keeps its order
    qa = real_facts.DataFacts({}, None, 5, {"start": 0.0, "length": 3.0, "EM": 1.5, "F1": 9.25}, {})
    assert real_facts.from_table(real_facts.as_table(qa)) == qa


def test_a_page_without_its_data_is_made_from_the_stored_runs(stored, monkeypatch):
    setup, run, data = stored
    shutil.rmtree(data)
    data.mkdir()  # the folder named, the dataset not in it
    with scoped(Scope("hatexplain", "default", chapter.DATASETS, True)) as scope:
        again = chapter.run(setup, device=CPU, progress=False)
    pd.testing.assert_frame_equal(again.per_seed, run.per_seed, check_exact=True)
    assert again.data == run.data and not isinstance(again.data, Prepared)  # the facts, from the store
    assert run.data.uniform["main"] > 0 and run.data.majority is not None
    assert len(scope.used) == 5 and all(u["from_store"] and u["data_unseen"] == ["hatexplain"] for u in scope.used)
    assert stored_runs(scope.used)["data_unseen"] == ["hatexplain"]
    assert "read without their data (hatexplain), which was not here" in banner(
        {"profile": "default", "stored_runs": stored_runs(scope.used)}
    )


def test_without_its_data_a_run_to_compute_names_the_files_before_anything_is_written(stored, tmp_path):
    _, _, data = stored
    shutil.rmtree(data)
    data.mkdir()  # the folder named, the dataset not in it
    before = sorted(p.name for p in (tmp_path / "store").rglob("*"))
    other = resolve("hatexplain", "smoke", {"download": False, "epochs": 2})[1]
    with scoped(Scope("hatexplain", "default", chapter.DATASETS, True)):
        with pytest.raises(
            DataUnavailable,
            match=r"hatexplain data not available \(the store does not hold this setup's runs of hatexplain\)",
        ):
            chapter.run(other, device=CPU, progress=False)
    assert sorted(p.name for p in (tmp_path / "store").rglob("*")) == before


def test_other_data_is_no_stored_run_of_this_key(stored):
    """Only data that is absent is taken on trust: other bytes are other data, and the runs are computed anew."""
    setup, run, data = stored
    write_hatexplain_offline(data, {"train": 100, "val": 12, "test": 60})
    with scoped(Scope("hatexplain", "default", chapter.DATASETS, True)) as scope:
        again = chapter.run(setup, device=CPU, progress=False)
    assert not any(u["from_store"] for u in scope.used) and again.data.info != run.data.info


def test_a_page_made_from_the_store_loads_no_data_though_it_is_here(stored, monkeypatch):
    """The data is loaded where a run is computed (``store_data.loaded``), never to read stored runs: a page of a
    chapter the store holds whole costs no preparation of its dataset."""
    setup, run, _ = stored
    monkeypatch.setattr(chapter, "data", lambda s: pytest.fail("the data was loaded to read stored runs"))
    with scoped(Scope("hatexplain", "default", chapter.DATASETS, True)) as scope:
        again = chapter.run(setup, device=CPU, progress=False)
    assert all(u["from_store"] and "data_unseen" not in u for u in scope.used) and again.data == run.data
    made = []
    deferred = store_data.loaded(lambda: made.append(1) or "data")
    assert made == [] and deferred.value() == deferred.value() == "data" and made == [1]  # made once, when asked


def test_listing_the_runs_reads_no_data(stored, monkeypatch):
    """``results status`` plans through the chapter: its data's files are hashed for the keys, never loaded."""
    setup, _, _ = stored
    monkeypatch.setattr(chapter, "data", lambda s: pytest.fail("the data was loaded to list the runs"))
    states = store.plan(
        lambda: chapter.run(setup, device=CPU, progress=False), Scope("hatexplain", "default", chapter.DATASETS, True)
    )
    assert states is not None and [s.state for s in states] == ["current"] * 5
