"""The deviations page's table of uniform-attention values (``chapters.beside.uniform``): computed by the library,
and the committed file agrees with the store's data-facts runs, which the same function computed."""

import pandas as pd
from fake_data import write_hatexplain_offline

from qkov_lib.chapters.beside import uniform
from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.data import CACHE_ENV, DATA_ENV
from qkov_lib.runs import real_facts

STORE = REPO_ROOT / "data" / "store" / "official"


def committed() -> pd.DataFrame:
    """The committed table, read back from its Markdown."""
    lines = [line for line in uniform.OUT.read_text().splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return pd.DataFrame(cells[2:], columns=cells[0])


def stored(chapter: str) -> real_facts.DataFacts:
    return real_facts.from_table(pd.read_csv(STORE / chapter / "data-facts.csv"))


def test_the_table_spans_tokens_lengths_and_depths_and_names_the_authors_two_baselines(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    write_hatexplain_offline(tmp_path)
    table = uniform.table()
    assert len(table) == len(uniform.TOKENS) * len(uniform.LENGTHS) * len(uniform.DEPTHS)
    flat = table[table["mask"] == "none"].groupby(["tokens", "length"])["uniform (%)"]
    assert (flat.nunique() == 1).all()  # with nothing masked, even attention stays even through the layers
    authors = table.dropna(subset=["authors' baseline (%)"])
    assert authors[["tokens", "length", "layers"]].values.tolist() == [
        ["wordpiece", 128, 1],
        ["wordpiece", 96, 2],
    ]
    assert list(authors["authors' baseline (%)"]) == [2.67, 7.15]
    text = uniform.markdown(table)
    assert text.startswith(uniform.HEADER) and "| wordpiece |" in text and "nan" not in text


def test_the_committed_table_agrees_with_the_stored_official_facts():
    """Runs without the data: the rows of official's own setups equal the uniform values its stored runs hold."""
    table = committed().set_index(["tokens", "length", "layers", "mask"])["uniform (%)"]
    one, layers = stored("hatexplain").uniform, stored("hatexplain_layers").uniform
    assert table[("wordpiece", "128", "1", "none")] == f"{one['main']:.2f}"
    assert table[("wordpiece", "96", "2", "causal")] == f"{layers['2']:.2f}"
    assert table[("wordpiece", "96", "4", "causal")] == f"{layers['4']:.2f}"
