"""The deviations page's SVA sizes (``chapters.beside.sva_sizes``): read from the committed store's data-facts run,
so the committed table is regenerated without the data and must agree with it to the character."""

from qkov_lib.chapters import sva
from qkov_lib.chapters.beside import sva_sizes


def test_the_committed_table_is_the_one_the_store_gives():
    held = sva_sizes.facts()
    table = sva_sizes.table(held)
    assert sva_sizes.OUT.read_text(encoding="utf-8") == sva_sizes.markdown(table)
    ours = dict(zip(table[""], table["official (offline prefixes)"]))
    assert ours["training examples"] == held.train_examples
    assert ours["mini-batch steps (15 epochs of 32)"] == 15 * (held.train_examples // 32)
    assert table["the authors"].tolist()[:2] == [sva.AUTHORS_SENTENCES, sva.AUTHORS_STEPS]
    assert "nan" not in sva_sizes.markdown(table)
