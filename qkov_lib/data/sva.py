"""Subject-verb agreement (Linzen, Dupoux & Goldberg, 2016): predict the number of a verb (VBZ singular / VBP plural)
from the sentence prefix before it; the relevant token is the subject (Section 7).

Canonical release: ``agr_50_mostcommon_10K.tsv.gz`` (every sentence with its subject and verb indices), split at
random into ``train_fraction`` for training and the rest for testing. Offline copies under $QKOV_DATA_DIR/sva: the
authors' number-prediction prefixes (``rnn_agr_simple/numpred.*``, no subject index) for training, and the
colorlessgreen Linzen test subset with parser-derived subject indices (``derived/linzen_testset_subjects.tsv``,
rows whose parse agrees with the verb's number) for testing.
"""
from __future__ import annotations

import csv
import gzip
import io
import zlib
from pathlib import Path

import numpy as np

from .registry import DataError, canonical_file, not_found, offline_file, read_text
from .text import TextSplit

CLASSES = ("VBZ", "VBP")  # singular, plural
TRAIN_FILES = ("numpred.val",)  # the 1% dev split: disjoint from the test sentences by construction
SUBJECT_COLUMNS = ("sent_id", "sentence", "verb_index", "label", "subj_index", "parser_agrees")
CANONICAL_COLUMNS = ("sentence", "verb_pos", "verb_index", "subj_index")


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
        raise DataError(f"{path} lacks the column(s) {', '.join(missing)} (header: {reader.fieldnames}); it is not "
                        f"the expected file, copy or download it again")
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


def _subject_split(path: Path, name: str) -> TextSplit:
    tokens, labels, rel = [], [], []
    for line, row in enumerate(_tsv_rows(read_text(path), path, SUBJECT_COLUMNS), 2):
        if row["parser_agrees"] != "1":
            continue
        where = f"{path} line {line}"
        words, verb, subj = row["sentence"].split(), _index(row, "verb_index", where), _index(row, "subj_index", where)
        if not 0 <= subj < verb <= len(words):
            raise DataError(f"{where}: subject index {subj} and verb index {verb} do not fit its {len(words)} words")
        tokens.append(words[:verb])
        labels.append(_label(row["label"], where))
        rel.append(_subject_mask(subj, verb))
    return TextSplit(name, tokens, np.asarray(labels), rel)


def _offline(train_files: tuple[str, ...]) -> tuple[dict[str, TextSplit], dict] | None:
    test_path = offline_file("sva/derived/linzen_testset_subjects.tsv")
    if test_path is None:
        return None
    tokens, labels = [], []
    for fname in train_files:
        path = offline_file(f"sva/rnn_agr_simple/{fname}")
        if path is None:
            raise DataError(f"offline SVA copy incomplete: sva/rnn_agr_simple/{fname} is missing")
        t, lab = _prefixes(path)
        tokens += t
        labels += lab
    train = TextSplit("train", tokens, np.asarray(labels), [None] * len(tokens))
    info = {"source": "offline copies", "train": f"prefixes of {', '.join(train_files)} (no subject index)",
            "test": "colorlessgreen Linzen subset, parser-derived subjects (parser_agrees == 1)"}
    return {"train": train, "test": _subject_split(test_path, "test")}, info


def _canonical(download: bool, train_fraction: float, seed: int) -> tuple[dict[str, TextSplit], dict] | None:
    path = canonical_file("sva", "agr_50_mostcommon_10K.tsv.gz", download)
    if path is None:
        return None
    try:
        with gzip.open(path, "rb") as fh:
            text = fh.read()
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"{path} cannot be read ({err}); the download is truncated, delete it and fetch again") \
            from None
    try:
        rows = _tsv_rows(text.decode("utf-8"), path, CANONICAL_COLUMNS)
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: byte {err.start} of the uncompressed text is not UTF-8; the file is corrupt, "
                        f"delete it and fetch again") from None
    tokens, labels, rel = [], [], []
    for line, row in enumerate(rows, 2):
        where = f"{path} line {line}"
        words = row["sentence"].split()
        verb, subj = _index(row, "verb_index", where) - 1, _index(row, "subj_index", where) - 1  # 1-based
        if not 0 <= subj < verb < len(words):
            raise DataError(f"{where}: subject {subj + 1} and verb {verb + 1} do not fit the sentence")
        tokens.append(words[:verb])
        labels.append(_label(row["verb_pos"], where))
        rel.append(_subject_mask(subj, verb))
    order = np.random.default_rng(seed).permutation(len(rows))
    cut = int(round(train_fraction * len(rows)))

    def pick(idx: np.ndarray, name: str) -> TextSplit:
        idx = np.sort(idx)
        return TextSplit(name, [tokens[i] for i in idx], np.asarray(labels)[idx], [rel[i] for i in idx])

    info = {"source": "canonical release", "split": f"random {train_fraction:.0%} train (seed {seed}), rest test"}
    return {"train": pick(order[:cut], "train"), "test": pick(order[cut:], "test")}, info


def load(download: bool = False, train_files: tuple[str, ...] = TRAIN_FILES,
         train_fraction: float = 0.1, seed: int = 0) -> tuple[dict[str, TextSplit], dict]:
    """Train and test splits and a provenance record: offline copies first, then the canonical release in the
    cache (downloaded when ``download``); one clear error when neither is there."""
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must lie in (0, 1) (got {train_fraction!r})")
    found = _offline(tuple(train_files)) or _canonical(download, train_fraction, seed)
    if found is None:
        raise not_found("sva")
    return found
