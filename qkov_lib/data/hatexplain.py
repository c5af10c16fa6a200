"""HateXplain (Mathew et al., 2021): posts, majority labels over three annotators, and annotator rationales as the
relevant tokens (Section 7).

Two layouts are read: the canonical release (``dataset.json`` + ``post_id_divisions.json``, downloaded into the
cache) and the offline copies under $QKOV_DATA_DIR/hatexplain (Hugging Face JSON Lines for validation and test; for
train, ``train_partial/``: tokens from the ERASER ``docs`` archive and labels from ``training_data.csv``, no
per-annotator rationales). Posts without a majority label are dropped, as in the paper.
"""

from __future__ import annotations

import csv
import io
import json
import tarfile
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .registry import DataError, canonical_file, not_found, offline_file, read_json, read_text
from .text import TextSplit
from .wordpiece import TOKENS, tokenised

CLASSES = ("hatespeech", "normal", "offensive")  # the Hugging Face codes 0, 1, 2
RATIONALE_RULES = ("union", "majority", "mean")
ANNOTATORS = 3  # every HateXplain post has three annotators
RULE_WORDS = {  # each rule in words, for a page (glued): what counts as relevant, and how much
    "union": "every word any annotator marked, each counting fully",
    "majority": "the words at least half of the annotators who marked any marked, each counting fully",
    "mean": "every word any annotator marked, weighted by the share of the three annotators who marked it (the "
    "authors' notebooks)",
}
DOCS = "Model_Eval/docs"  # where the ERASER archive keeps one file of tokens per post id


TOKEN_WORDS = {
    "words": "the posts' words as the dataset gives them",
    "wordpiece": "bert-base-uncased WordPieces, [CLS] first and [SEP] last (the authors' tokeniser)",
}


def majority(labels: list[int]) -> int | None:
    """The label at least two of three annotators gave, or None."""
    label, count = Counter(labels).most_common(1)[0]
    return label if count >= 2 else None


def relevance(rationales: list[list[int]], n_tokens: int, rule: str, where: str) -> np.ndarray | None:
    """Combine per-annotator 0/1 rationales: ``union`` (any annotator) or ``majority`` (at least half of those
    who marked tokens), 0/1 relevance as booleans; or ``mean``, weights in [0, 1] as floats: the mean of the three
    annotators' masks, a mask of zeros standing for each annotator who marked nothing, so a word one annotator of
    three marked weighs 1/3 (the authors' notebooks: ``returnMask``, HateXplain_Same_LR_Final_Config.ipynb cell 27,
    In [20], pads every post's masks to three with zeros). None when nobody marked any token (posts labelled
    normal). The attention mass on the ``mean`` weights is the mean of the masses on the three masks, the authors'
    (``metrics.rationale.relevant_mass``); union and majority differ from it (book/deviations.md)."""
    if rule not in RATIONALE_RULES:
        raise ValueError(f"rationale rule must be one of {', '.join(RATIONALE_RULES)} (got {rule!r})")
    if not rationales:
        return None
    if len(rationales) > ANNOTATORS:
        raise DataError(
            f"{where}: {len(rationales)} rationales for {ANNOTATORS} annotators; the file is "
            f"inconsistent, copy or download it again"
        )
    marks = np.zeros((len(rationales), n_tokens))
    for j, r in enumerate(rationales):
        if len(r) != n_tokens:
            raise DataError(
                f"{where}: a rationale of length {len(r)} for {n_tokens} tokens; the file is "
                f"inconsistent, copy or download it again"
            )
        marks[j] = r
    if rule == "mean":
        return marks.sum(0) / ANNOTATORS
    return np.asarray(marks.any(0) if rule == "union" else marks.mean(0) >= 0.5)  # a mask per token


def _read_jsonl(path: Path) -> list[dict]:
    records = []
    for i, line in enumerate(read_text(path).splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise DataError(
                    f"{path} line {i} is not valid JSON ({err.msg}); the file is truncated or corrupt, "
                    f"copy or download it again"
                ) from None
    return records


def _hf_posts(path: Path) -> list[tuple[str, list[str], list[int], list[list[int]]]]:
    """The Hugging Face JSON Lines records as (id, tokens, annotator labels, rationales)."""
    posts = []
    for i, r in enumerate(_read_jsonl(path), 1):
        try:
            posts.append((r["id"], r["post_tokens"], r["annotators"]["label"], r["rationales"]))
        except (KeyError, TypeError) as err:
            raise DataError(
                f"{path} record {i} lacks the field {err}; the file is not the Hugging Face HateXplain "
                f"export, copy it again"
            ) from None
    return posts


def _train_labels(path: Path, n_ids: int) -> list[list[int]]:
    """The three annotator labels of each row of ``training_data.csv`` (column ``labels``, e.g. "0, 1, 1")."""
    rows = list(csv.DictReader(io.StringIO(read_text(path), newline="")))
    if rows and "labels" not in rows[0]:
        raise DataError(f"{path} has no column 'labels' (columns: {', '.join(rows[0])}); copy the file again")
    if len(rows) != n_ids:
        raise DataError(f"{path} has {len(rows)} rows for {n_ids} train ids; the file is truncated")
    labels = []
    for i, row in enumerate(rows, 1):
        try:
            labels.append([int(v) for v in row["labels"].split(",")])
        except (ValueError, AttributeError):
            raise DataError(
                f"{path} data row {i}: labels {row['labels']!r} are not class codes like '0, 1, 1'; the "
                f"file is corrupt, copy it again"
            ) from None
    return labels


def _archive_tokens(path: Path, wanted: set[str]) -> dict[str, list[str]]:
    """Tokens of the wanted posts from the ERASER archive: member ``Model_Eval/docs/<post id>``, one pass."""
    tokens: dict[str, list[str]] = {}
    try:
        with tarfile.open(path) as tar:  # one sequential pass: random access into a .tar.gz is quadratic
            for member in tar:
                folder, _, post_id = member.name.removeprefix("./").rpartition("/")
                if member.isfile() and folder == DOCS and post_id in wanted:
                    stream = tar.extractfile(member)
                    if stream is None:  # isfile() above: a regular member always has its bytes
                        raise DataError(
                            f"{path} member {member.name} cannot be read; the archive is corrupt, copy it again"
                        )
                    text = stream.read()
                    try:
                        tokens[post_id] = text.decode("utf-8").split(" ")
                    except UnicodeDecodeError:
                        raise DataError(
                            f"{path} member {member.name} is not UTF-8; the archive is corrupt, copy it again"
                        ) from None
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        raise DataError(
            f"{path} cannot be read ({type(err).__name__}: {err}); the archive is truncated or corrupt, copy it again"
        ) from None
    missing = wanted - tokens.keys()
    if missing:
        raise DataError(
            f"{path} has no member {DOCS}/<id> for {len(missing)} train posts (e.g. "
            f"{sorted(missing)[0]}); the archive is incomplete, copy or download it again"
        )
    return tokens


def _split(
    name: str, posts: Sequence[tuple[str, list[str], list[int], list[list[int]] | None]], rule: str
) -> tuple[TextSplit, int]:
    """Posts as (id, tokens, annotator labels, rationales or None: none recorded) -> a split and the number dropped
    for no majority."""
    tokens, labels, rel, dropped = [], [], [], 0
    for post_id, toks, votes, rationales in posts:
        label = majority(votes)
        if label is None:
            dropped += 1
            continue
        tokens.append(toks)
        labels.append(label)
        rel.append(relevance(rationales, len(toks), rule, f"post {post_id}") if rationales is not None else None)
    return TextSplit(name, tokens, np.asarray(labels), rel), dropped


def _divisions(path: Path, keys: tuple[str, ...]) -> dict[str, list[str]]:
    """post_id_divisions.json: a list of post ids under each of ``keys``; one DataError naming what is missing."""
    divisions = read_json(path)
    for key in keys:
        ids = divisions.get(key) if isinstance(divisions, dict) else None
        if not (isinstance(ids, list) and all(isinstance(i, str) for i in ids)):
            raise DataError(
                f"{path} has no list of post ids under {key!r} (it needs {', '.join(map(repr, keys))}); "
                f"the file is damaged or another file, copy or download it again"
            )
    return divisions


def _offline(rule: str) -> tuple[dict[str, TextSplit], dict] | None:
    divisions_path = offline_file("hatexplain/post_id_divisions.json")
    if divisions_path is None:
        return None
    divisions = _divisions(divisions_path, ("train",))
    splits: dict[str, TextSplit] = {}
    info: dict[str, Any] = {"source": "offline copies", "dropped (no majority)": {}}
    for name, fname in (("validation", "hatexplain_validation.json"), ("test", "hatexplain_test.json")):
        path = offline_file(f"hatexplain/{fname}")
        if path is None:
            raise DataError(f"offline HateXplain copy incomplete: hatexplain/{fname} is missing")
        splits[name], info["dropped (no majority)"][name] = _split(name, _hf_posts(path), rule)
    csv_path = offline_file("hatexplain/train_partial/training_data.csv")
    tar_path = offline_file("hatexplain/train_partial/ritwikmishra_Model_Eval_docs.tar.gz")
    if csv_path is None or tar_path is None:
        raise DataError(
            "offline HateXplain copy incomplete: hatexplain/train_partial/ needs training_data.csv and "
            "ritwikmishra_Model_Eval_docs.tar.gz"
        )
    ids = divisions["train"]
    votes = _train_labels(csv_path, len(ids))
    tokens = _archive_tokens(tar_path, set(ids))
    posts = [(post_id, tokens[post_id], v, None) for post_id, v in zip(ids, votes)]
    splits["train"], info["dropped (no majority)"]["train"] = _split("train", posts, rule)
    info["train rationales"] = "none offline (the per-annotator train rationales are not in the copies)"
    return splits, info


def _canonical(rule: str, download: bool) -> tuple[dict[str, TextSplit], dict] | None:
    data_path = canonical_file("hatexplain", "dataset.json", download)
    div_path = canonical_file("hatexplain", "post_id_divisions.json", download)
    if data_path is None or div_path is None:
        return None
    data, divisions = read_json(data_path), _divisions(div_path, ("train", "val", "test"))
    splits: dict[str, TextSplit] = {}
    info: dict[str, Any] = {"source": "canonical release", "dropped (no majority)": {}}
    for name, key in (("train", "train"), ("validation", "val"), ("test", "test")):
        posts = []
        for post_id in divisions[key]:
            if post_id not in data:
                raise DataError(f"{data_path} has no post {post_id} listed in post_id_divisions.json")
            rec = data[post_id]
            votes = [CLASSES.index(a["label"]) for a in rec["annotators"]]
            posts.append((post_id, rec["post_tokens"], votes, rec["rationales"]))
        splits[name], info["dropped (no majority)"][name] = _split(name, posts, rule)
    return splits, info


def load(rule: str = "union", download: bool = False, tokens: str = "words") -> tuple[dict[str, TextSplit], dict]:
    """Train, validation and test splits and a short provenance record; offline copies first, then the cache
    (downloading when ``download``); one clear error when neither is there. Every file's sha256 is checked
    (``registry``). ``tokens``: the posts' words as the dataset gives them, or their WordPieces (``wordpiece``)."""
    if rule not in RATIONALE_RULES:
        raise ValueError(f"rationale rule must be one of {', '.join(RATIONALE_RULES)} (got {rule!r})")
    if tokens not in TOKENS:
        raise ValueError(f"tokens must be one of {', '.join(TOKENS)} (got {tokens!r})")
    found = _offline(rule) or _canonical(rule, download)
    if found is None:
        raise not_found("hatexplain")
    splits, info = found
    return tokenised(splits, tokens), info | {"tokens": TOKEN_WORDS[tokens]}
