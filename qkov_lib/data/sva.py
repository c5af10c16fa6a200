"""Subject-verb agreement (Linzen, Dupoux & Goldberg, 2016): predict the number of a verb (VBZ singular / VBP plural)
from the sentence prefix before it; the relevant token is the subject (Section 7).

Canonical release: ``agr_50_mostcommon_10K.tsv.gz`` (every sentence with its subject and verb indices and its
number of attractors), split at random into ``train_fraction`` for training and the rest for testing.

Offline copies under $QKOV_DATA_DIR/sva: the authors' number-prediction prefixes (``rnn_agr_simple/numpred.val``, the
1% validation split, and ``numpred.test.1``-``5``, test dependencies with 1-5 attractors; no subject index) and the
colorlessgreen Linzen test subset with parser-derived subject indices (``derived/linzen_testset_subjects.tsv``, rows
whose parse agrees with the verb's number). The colorlessgreen sentences come from the same corpus: every prefix that
matches one of them (reading a replaced word as any word) is dropped from the prefixes, and the rest are split into
train and a held-out part (``heldout_fraction`` of each file, seeded). The colorlessgreen prefixes are the test set
with subjects; their words outside the training vocabulary are read as their part-of-speech tags, as the prefixes
were made (``pos_tags``).
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from pathlib import Path

import numpy as np

from .pos_tags import cached_tags
from .registry import DataError, canonical_file, not_found, offline_file, read_text
from .text import TextSplit

CLASSES = ("VBZ", "VBP")  # singular, plural
UNBINNED = -1  # the group of numpred.val, whose attractor counts the release does not give
NUMPRED = {"numpred.val": UNBINNED, **{f"numpred.test.{k}": k for k in range(1, 6)}}  # file -> attractors
SUBJECT_COLUMNS = ("sent_id", "sentence", "verb_index", "label", "subj_index", "n_attractors", "parser_agrees")
CANONICAL_COLUMNS = ("sentence", "verb_pos", "verb_index", "subj_index", "n_diff_intervening")
# the training text: prefixes before the verb (the offline release's and the canonical one's), or the colorlessgreen
# sentences whole, the verb included, as the authors' notebooks train (a named variant; it gives the label away)
SENTENCES = ("prefixes", "whole")
WHOLE_TEST = 0.2  # under ``whole``: the share of the colorlessgreen sentences tested on, per attractor count


def _label(tag: str, where: str) -> int:
    if tag not in CLASSES:
        raise DataError(f"{where}: label {tag!r} is neither VBZ nor VBP; the file is corrupt")
    return CLASSES.index(tag)


def _prefixes(path: Path) -> tuple[list[list[str]], list[int]]:
    tokens, labels = [], []
    for i, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        tag, sep, prefix = line.partition("\t")
        if not sep or not prefix.strip():
            raise DataError(f"{path} line {i}: expected 'VBZ|VBP<TAB>prefix'; the file is truncated or corrupt")
        tokens.append(prefix.split())
        labels.append(_label(tag, f"{path} line {i}"))
    return tokens, labels


def _tsv_rows(text: str, path: Path, need: tuple[str, ...]) -> list[dict[str, str]]:
    """Rows of a tab-separated file with a header that must hold the columns ``need``."""
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="\t")
    missing = [c for c in need if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(
            f"{path} lacks the column(s) {', '.join(missing)} (header: {reader.fieldnames}); it is not "
            f"the expected file, copy or download it again"
        )
    rows = list(reader)
    for line, row in enumerate(rows, 2):
        if any(row[c] is None for c in need):
            raise DataError(f"{path} line {line} has fewer fields than the header; the file is truncated or corrupt")
    return rows


def _index(row: dict[str, str], key: str, where: str) -> int:
    try:
        return int(row[key])
    except (TypeError, ValueError):
        raise DataError(f"{where}: {key} {row[key]!r} is not a whole number; the file is corrupt") from None


def _subject_mask(subj: int, verb: int) -> np.ndarray:
    """The relevant-token mask over the prefix before the verb: the subject alone."""
    mask = np.zeros(verb, dtype=bool)
    mask[subj] = True
    return mask


def _subject_and_verb(subj: int, verb: int, n: int) -> np.ndarray:
    """The relevant-token mask over a whole sentence of ``n`` words: the subject and the verb, as the authors'
    rationale marks them (OFFICIAL_CODE.md)."""
    mask = np.zeros(n, dtype=bool)
    mask[[subj, verb]] = True
    return mask


def _subject_split(path: Path, name: str, whole: bool = False) -> TextSplit:
    """The colorlessgreen prefixes whose parsed subject agrees with the verb: subject masks, attractor counts as
    groups, part-of-speech tags (of the whole sentence, cut to the prefix) as back-off tokens. ``whole``: the whole
    sentences instead, the verb included, with the subject and the verb as relevant tokens."""
    rows = _tsv_rows(read_text(path), path, SUBJECT_COLUMNS)
    tags = cached_tags(path, [row["sentence"].split(" ") for row in rows])
    tokens, labels, rel, groups, backoff = [], [], [], [], []
    for line, (row, row_tags) in enumerate(zip(rows, tags), 2):
        if row["parser_agrees"] != "1":
            continue
        where = f"{path} line {line}"
        words = row["sentence"].split(" ")
        verb, subj = _index(row, "verb_index", where), _index(row, "subj_index", where)
        if not 0 <= subj < verb < len(words) + (not whole):
            raise DataError(f"{where}: subject index {subj} and verb index {verb} do not fit its {len(words)} words")
        end = len(words) if whole else verb
        tokens.append(words[:end])
        backoff.append(row_tags[:end])
        labels.append(_label(row["label"], where))
        rel.append(_subject_and_verb(subj, verb, end) if whole else _subject_mask(subj, verb))
        groups.append(_index(row, "n_attractors", where))
    return TextSplit(name, tokens, np.asarray(labels), rel, np.asarray(groups), backoff)


def _numpred() -> TextSplit:
    """Every offline number-prediction prefix, grouped by its file's attractor count (UNBINNED for the val split)."""
    tokens, labels, groups = [], [], []
    for fname, attractors in NUMPRED.items():
        path = offline_file(f"sva/rnn_agr_simple/{fname}")
        if path is None:
            raise DataError(
                f"offline SVA copy incomplete: sva/rnn_agr_simple/{fname} is missing; copy the whole "
                f"rnn_agr_simple folder (data/README.md)"
            )
        t, lab = _prefixes(path)
        if not t:
            raise DataError(f"{path} holds no prefix; the copy is truncated, copy it again")
        tokens += t
        labels += lab
        groups += [attractors] * len(t)
    return TextSplit("prefixes", tokens, np.asarray(labels), [None] * len(tokens), np.asarray(groups))


def attractors(group: int | str) -> str:
    """A group's label in the accuracy-by-attractors table."""
    return "not binned (numpred.val)" if str(group) == str(UNBINNED) else str(group)


def _is_tag(token: str) -> bool:
    """A part-of-speech tag standing for a replaced word (the release's words are lower case, its tags upper)."""
    return token.isupper()


def _without_test(pool: TextSplit, test: TextSplit) -> tuple[TextSplit, int]:
    """``pool`` less every prefix that matches a test prefix word for word, a replaced word (a tag) matching any
    word the pool never shows; returns the rest and how many were dropped."""
    known = {t for toks in pool.tokens for t in toks if not _is_tag(t)}
    wild = "\x00"
    test_keys = {tuple(t if t in known else wild for t in toks) for toks in test.tokens}
    keep = np.asarray([tuple(wild if _is_tag(t) else t for t in toks) not in test_keys for toks in pool.tokens])
    return pool.take(np.flatnonzero(keep)), int((~keep).sum())


def _stratified(pool: TextSplit, fraction: float, seed: int) -> tuple[TextSplit, TextSplit]:
    """Train and held-out parts: ``fraction`` of each group, drawn with ``seed``; order kept."""
    if pool.groups is None:
        raise DataError(f"the {pool.name} split has no groups to stratify by; give each example its attractor count")
    rng = np.random.default_rng(seed)
    held = np.zeros(len(pool), dtype=bool)
    for group in np.unique(pool.groups):
        rows = np.flatnonzero(pool.groups == group)
        held[rng.choice(rows, round(fraction * len(rows)), replace=False)] = True
    return pool.take(np.flatnonzero(~held), "train"), pool.take(np.flatnonzero(held), "heldout")


def _offline_whole(path: Path, heldout_fraction: float, seed: int) -> tuple[dict[str, TextSplit], dict]:
    """The ``whole`` variant: the colorlessgreen sentences alone, verb included, split by attractor count into a
    test share (``WHOLE_TEST``), a held-out share of the rest and training, each drawn with ``seed``."""
    pool, test = _stratified(_subject_split(path, "sentences", whole=True), WHOLE_TEST, seed)
    train, heldout = _stratified(pool, heldout_fraction, seed + 1)
    info = {
        "source": "offline copies",
        "sentences": "whole sentences, the verb included (sentences = whole)",
        "train": "colorlessgreen Linzen subset, parser-derived subjects where the parse agrees with the verb",
        "held-out": f"{heldout_fraction:.0%} of the training sentences per attractor count (seed {seed + 1})",
        "test": f"{WHOLE_TEST:.0%} of the sentences per attractor count (seed {seed}); relevant tokens: the subject "
        "and the verb; words outside the vocabulary read as their part-of-speech tags",
    }
    return {"train": train, "heldout": heldout, "test": test.take(np.arange(len(test)), "test")}, info


def _offline(heldout_fraction: float, seed: int, sentences: str) -> tuple[dict[str, TextSplit], dict] | None:
    test_path = offline_file("sva/derived/linzen_testset_subjects.tsv")
    if test_path is None:
        return None
    if sentences == "whole":
        return _offline_whole(test_path, heldout_fraction, seed)
    test = _subject_split(test_path, "test")
    pool, dropped = _without_test(_numpred(), test)
    train, heldout = _stratified(pool, heldout_fraction, seed)
    info = {
        "source": "offline copies",
        "train": f"number-prediction prefixes ({', '.join(NUMPRED)}; no subject index), "
        f"{dropped} prefixes matching a test sentence dropped",
        "held-out": f"{heldout_fraction:.0%} of each file (seed {seed})",
        "test": "colorlessgreen Linzen subset, parser-derived subjects where the parse agrees with the verb, words "
        "outside the vocabulary read as their part-of-speech tags",
    }
    return {"train": train, "heldout": heldout, "test": test}, info


def _canonical(download: bool, train_fraction: float, seed: int) -> tuple[dict[str, TextSplit], dict] | None:
    path = canonical_file("sva", "agr_50_mostcommon_10K.tsv.gz", download)
    if path is None:
        return None
    try:
        with gzip.open(path, "rb") as fh:
            text = fh.read()
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(
            f"{path} cannot be read ({err}); the download is truncated, delete it and fetch again"
        ) from None
    try:
        rows = _tsv_rows(text.decode("utf-8"), path, CANONICAL_COLUMNS)
    except UnicodeDecodeError as err:
        raise DataError(
            f"{path}: byte {err.start} of the uncompressed text is not UTF-8; the file is corrupt, "
            f"delete it and fetch again"
        ) from None
    tokens, labels, rel, groups = [], [], [], []
    for line, row in enumerate(rows, 2):
        where = f"{path} line {line}"
        words = row["sentence"].split()
        verb, subj = _index(row, "verb_index", where) - 1, _index(row, "subj_index", where) - 1  # 1-based
        if not 0 <= subj < verb < len(words):
            raise DataError(f"{where}: subject {subj + 1} and verb {verb + 1} do not fit the sentence")
        tokens.append(words[:verb])
        labels.append(_label(row["verb_pos"], where))
        rel.append(_subject_mask(subj, verb))
        groups.append(_index(row, "n_diff_intervening", where))
    order = np.random.default_rng(seed).permutation(len(rows))
    cut = round(train_fraction * len(rows))

    info = {"source": "canonical release", "split": f"random {train_fraction:.0%} train (seed {seed}), rest test"}
    every = TextSplit("all", tokens, np.asarray(labels), rel, np.asarray(groups))
    return {"train": every.take(np.sort(order[:cut]), "train"), "test": every.take(np.sort(order[cut:]), "test")}, info


def load(
    download: bool = False,
    heldout_fraction: float = 0.1,
    train_fraction: float = 0.1,
    seed: int = 0,
    sentences: str = "prefixes",
) -> tuple[dict[str, TextSplit], dict]:
    """Train and test splits (offline also a held-out split) and a provenance record: offline copies first, then
    the canonical release in the cache (downloaded when ``download``); one clear error when neither is there.
    ``sentences`` (SENTENCES): the prefixes before the verb, or, offline only, the colorlessgreen sentences whole."""
    for name, value in (("heldout_fraction", heldout_fraction), ("train_fraction", train_fraction)):
        if not 0 < value < 1:
            raise ValueError(f"{name} must lie in (0, 1) (got {value!r})")
    if sentences not in SENTENCES:
        raise ValueError(f"sentences must be one of {SENTENCES} (got {sentences!r})")
    found = _offline(heldout_fraction, seed, sentences)
    if found is None and sentences == "whole":
        raise DataError(
            "sentences = whole needs the offline colorlessgreen subset with subjects "
            "(sva/derived/linzen_testset_subjects.tsv under $QKOV_DATA_DIR, data/README.md); it is not there"
        )
    found = found or _canonical(download, train_fraction, seed)
    if found is None:
        raise not_found("sva")
    return found
