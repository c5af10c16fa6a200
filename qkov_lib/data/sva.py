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
from pathlib import Path

import numpy as np

from .registry import DataError, canonical_file, not_found, offline_file
from .text import TextSplit

CLASSES = ("VBZ", "VBP")  # singular, plural
TRAIN_FILES = ("numpred.val",)  # the 1% dev split: disjoint from the test sentences by construction
OFFLINE_LAYOUT = "sva/rnn_agr_simple/numpred.* and sva/derived/linzen_testset_subjects.tsv"


def _label(tag: str, where: str) -> int:
    if tag not in CLASSES:
        raise DataError(f"{where}: label {tag!r} is neither VBZ nor VBP; the file is corrupt")
    return CLASSES.index(tag)


def _prefixes(path: Path) -> tuple[list[list[str]], list[int]]:
    tokens, labels = [], []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        tag, sep, prefix = line.partition("\t")
        if not sep or not prefix.strip():
            raise DataError(f"{path} line {i}: expected 'VBZ|VBP<TAB>prefix'; the file is truncated or corrupt")
        tokens.append(prefix.split())
        labels.append(_label(tag, f"{path} line {i}"))
    return tokens, labels


def _subject_split(path: Path, name: str) -> TextSplit:
    tokens, labels, rel = [], [], []
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row.get("parser_agrees") != "1":
                continue
            words, verb, subj = row["sentence"].split(), int(row["verb_index"]), int(row["subj_index"])
            if not 0 <= subj < verb <= len(words):
                raise DataError(f"{path} sentence {row['sent_id']}: subject index {subj} and verb index {verb} "
                                f"do not fit its {len(words)} words")
            mask = np.zeros(verb, dtype=bool)
            mask[subj] = True
            tokens.append(words[:verb])
            labels.append(_label(row["label"], f"{path} sentence {row['sent_id']}"))
            rel.append(mask)
    return TextSplit(name, tokens, np.asarray(labels), rel)


def _offline(train_files: tuple[str, ...], verify: bool) -> tuple[dict[str, TextSplit], dict] | None:
    test_path = offline_file("sva/derived/linzen_testset_subjects.tsv", verify)
    if test_path is None:
        return None
    tokens, labels = [], []
    for fname in train_files:
        path = offline_file(f"sva/rnn_agr_simple/{fname}", verify)
        if path is None:
            raise DataError(f"offline SVA copy incomplete: sva/rnn_agr_simple/{fname} is missing")
        t, lab = _prefixes(path)
        tokens += t
        labels += lab
    train = TextSplit("train", tokens, np.asarray(labels), [None] * len(tokens))
    info = {"source": "offline copies", "train": f"prefixes of {', '.join(train_files)} (no subject index)",
            "test": "colorlessgreen Linzen subset, parser-derived subjects (parser_agrees == 1)"}
    return {"train": train, "test": _subject_split(test_path, "test")}, info


def _canonical(download: bool, verify: bool, train_fraction: float, seed: int
               ) -> tuple[dict[str, TextSplit], dict] | None:
    path = canonical_file("sva", "agr_50_mostcommon_10K.tsv.gz", download, verify)
    if path is None:
        return None
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
    except (OSError, EOFError) as err:
        raise DataError(f"{path} cannot be read ({err}); the download is truncated, delete it and fetch again") \
            from None
    need = {"sentence", "verb_pos", "verb_index", "subj_index"}
    if not rows or not need <= rows[0].keys():
        raise DataError(f"{path} lacks the columns {sorted(need)}; it is not Linzen's agreement file")
    tokens, labels, rel = [], [], []
    for i, row in enumerate(rows):
        words = row["sentence"].split()
        verb, subj = int(row["verb_index"]) - 1, int(row["subj_index"]) - 1  # 1-based in the release
        if not 0 <= subj < verb < len(words):
            raise DataError(f"{path} row {i + 2}: subject {subj + 1} and verb {verb + 1} do not fit the sentence")
        mask = np.zeros(verb, dtype=bool)
        mask[subj] = True
        tokens.append(words[:verb])
        labels.append(_label(row["verb_pos"], f"{path} row {i + 2}"))
        rel.append(mask)
    order = np.random.default_rng(seed).permutation(len(rows))
    cut = int(round(train_fraction * len(rows)))

    def pick(idx: np.ndarray, name: str) -> TextSplit:
        idx = np.sort(idx)
        return TextSplit(name, [tokens[i] for i in idx], np.asarray(labels)[idx], [rel[i] for i in idx])

    info = {"source": "canonical release", "split": f"random {train_fraction:.0%} train (seed {seed}), rest test"}
    return {"train": pick(order[:cut], "train"), "test": pick(order[cut:], "test")}, info


def load(download: bool = False, verify: bool = True, train_files: tuple[str, ...] = TRAIN_FILES,
         train_fraction: float = 0.1, seed: int = 0) -> tuple[dict[str, TextSplit], dict]:
    """Train and test splits and a provenance record: offline copies first, then the canonical release in the
    cache (downloaded when ``download``); one clear error when neither is there."""
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must lie in (0, 1) (got {train_fraction!r})")
    found = _offline(tuple(train_files), verify) or _canonical(download, verify, train_fraction, seed)
    if found is None:
        raise not_found("sva", OFFLINE_LAYOUT)
    return found
