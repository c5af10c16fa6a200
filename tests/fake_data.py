"""Tiny HateXplain, SVA and SQuAD datasets, written by the tests in the offline and the canonical layouts.

The data are learnable on purpose: a class is signalled by one trigger word (HateXplain, also its rationale) or by
the subject's number (SVA), so a smoke run has something to attend to. Each writer ends by sealing its folder: a
SHA256SUMS manifest over every file, which the loaders check as they would the published hashes.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import random
import tarfile
from pathlib import Path

from qkov_lib.data.registry import MANIFEST

FILLER = [f"w{i}" for i in range(30)]
TRIGGERS = {0: "hateword", 2: "rudeword"}  # hatespeech, offensive; normal (1) has none
CLASS_NAMES = ("hatespeech", "normal", "offensive")


def _post(rng: random.Random, label: int) -> tuple[list[str], list[list[int]]]:
    tokens = [rng.choice(FILLER) for _ in range(rng.randint(4, 12))]
    if label == 1:
        return tokens, []
    pos = rng.randrange(len(tokens))
    tokens[pos] = TRIGGERS[label]
    marks = [int(i == pos) for i in range(len(tokens))]
    return tokens, [marks, marks]


def seal(root: Path) -> None:
    """Write root/SHA256SUMS for every file below ``root`` (as `sha256sum` would)."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(root).as_posix()}\n" for p in files]
    (root / MANIFEST).write_text("".join(lines))


def hatexplain_posts(n: dict[str, int], seed: int = 0) -> dict[str, list[dict]]:
    rng = random.Random(seed)
    out = {}
    for split, count in n.items():
        posts = []
        for i in range(count):
            label = i % 3
            tokens, rationales = _post(rng, label)
            other = (label + 1) % 3
            posts.append(
                {
                    "id": f"{split}{i}_twitter",
                    "labels": [label, label, other],
                    "tokens": tokens,
                    "rationales": rationales,
                }
            )
        out[split] = posts
    return out


def write_hatexplain_offline(root: Path, n: dict[str, int] | None = None) -> dict[str, list[dict]]:
    posts = hatexplain_posts(n or {"train": 120, "val": 12, "test": 60})
    folder = root / "hatexplain"
    (folder / "train_partial").mkdir(parents=True, exist_ok=True)
    (folder / "post_id_divisions.json").write_text(json.dumps({k: [p["id"] for p in v] for k, v in posts.items()}))
    for split, fname in (("val", "hatexplain_validation.json"), ("test", "hatexplain_test.json")):
        lines = [
            json.dumps(
                {
                    "id": p["id"],
                    "annotators": {"label": p["labels"], "annotator_id": [1, 2, 3], "target": [["None"]] * 3},
                    "rationales": p["rationales"],
                    "post_tokens": p["tokens"],
                }
            )
            for p in posts[split]
        ]
        (folder / fname).write_text("\n".join(lines) + "\n")
    with open(folder / "train_partial" / "training_data.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "majority_label", "severity", "labels", "annotator_ids", "targets"])
        for p in posts["train"]:
            w.writerow(
                [" ".join(p["tokens"]), p["labels"][0], "Low", ", ".join(map(str, p["labels"])), "1, 2, 3", "None"]
            )
    with tarfile.open(folder / "train_partial" / "ritwikmishra_Model_Eval_docs.tar.gz", "w:gz") as tar:
        for p in posts["train"] + posts["val"] + posts["test"]:
            data = " ".join(p["tokens"]).encode()
            info = tarfile.TarInfo(f"Model_Eval/docs/{p['id']}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    seal(root)
    return posts


def write_hatexplain_canonical(cache: Path, n: dict[str, int] | None = None) -> dict[str, list[dict]]:
    posts = hatexplain_posts(n or {"train": 120, "val": 12, "test": 60}, seed=1)
    folder = cache / "hatexplain"
    folder.mkdir(parents=True, exist_ok=True)
    dataset = {
        p["id"]: {
            "post_id": p["id"],
            "annotators": [
                {"label": CLASS_NAMES[v], "annotator_id": j, "target": ["None"]} for j, v in enumerate(p["labels"])
            ],
            "rationales": p["rationales"],
            "post_tokens": p["tokens"],
        }
        for split in posts.values()
        for p in split
    }
    (folder / "dataset.json").write_text(json.dumps(dataset))
    (folder / "post_id_divisions.json").write_text(json.dumps({k: [p["id"] for p in v] for k, v in posts.items()}))
    seal(cache)
    return posts


def sva_sentences(n: int, seed: int = 0) -> list[tuple[list[str], int, int]]:
    """(words up to and including the verb, subject index, label 0 = VBZ / 1 = VBP)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = i % 2
        subj = ("dog", "dogs")[label]
        words = ["the"] + [rng.choice(FILLER) for _ in range(rng.randint(0, 2))] + [subj]
        words += [rng.choice(FILLER) for _ in range(rng.randint(0, 4))]
        out.append((words + [("barks", "bark")[label]], words.index(subj), label))
    return out


def write_sva_offline(root: Path, n_train: int = 200, n_test: int = 60) -> None:
    folder = root / "sva"
    (folder / "rnn_agr_simple").mkdir(parents=True, exist_ok=True)
    (folder / "derived").mkdir(parents=True, exist_ok=True)
    lines = [f"{('VBZ', 'VBP')[lab]}\t{' '.join(w[:-1])}" for w, _, lab in sva_sentences(n_train)]
    (folder / "rnn_agr_simple" / "numpred.val").write_text("\n".join(lines) + "\n")
    for k in range(1, 6):  # the attractor-binned files: a few prefixes each, the first test sentences among them
        lines = [f"{('VBZ', 'VBP')[lab]}\t{' '.join(w[:-1])}" for w, _, lab in sva_sentences(10 + k, seed=10 + k)]
        if k == 1:
            lines += [f"{('VBZ', 'VBP')[lab]}\t{' '.join(w[:-1])}" for w, _, lab in sva_sentences(3, seed=1)]
        (folder / "rnn_agr_simple" / f"numpred.test.{k}").write_text("\n".join(lines) + "\n")
    with open(folder / "derived" / "linzen_testset_subjects.tsv", "w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t")
        w.writerow(
            [
                "sent_id",
                "sentence",
                "verb_index",
                "verb",
                "label",
                "subj_index",
                "subj",
                "n_attractors",
                "parser_agrees",
            ]
        )
        for i, (words, subj, lab) in enumerate(sva_sentences(n_test, seed=1)):
            w.writerow(
                [
                    i,
                    " ".join(words),
                    len(words) - 1,
                    words[-1],
                    ("VBZ", "VBP")[lab],
                    subj,
                    words[subj],
                    i % 3,
                    1 if i % 10 else 0,
                ]
            )
    seal(root)


def write_sva_canonical(cache: Path, n: int = 300) -> None:
    folder = cache / "sva"
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / "agr_50_mostcommon_10K.tsv.gz", "wt", newline="") as fh:
        w = csv.writer(fh, delimiter="\t")
        w.writerow(["sentence", "verb", "verb_pos", "subj_index", "verb_index", "n_diff_intervening"])
        for i, (words, subj, lab) in enumerate(sva_sentences(n, seed=2)):
            w.writerow([" ".join(words), words[-1], ("VBZ", "VBP")[lab], subj + 1, len(words), i % 3])  # 1-based
    seal(cache)


def write_all_offline(root: Path) -> Path:
    write_hatexplain_offline(root)
    write_sva_offline(root)
    write_squad_offline(root)
    return root


def squad_file(n_articles: int = 5, per_article: int = 4, seed: int = 0) -> dict:
    """A small SQuAD v1.1 file: each paragraph names a colour, each question asks for it (answer offsets exact)."""
    rng = random.Random(seed)
    data = []
    for a in range(n_articles):
        qas, context = [], ""
        for q in range(per_article):
            colour = rng.choice(["red", "green", "blue", "amber"])
            sentence = f"The w{rng.randrange(30)} of item {q} is {colour} . "
            start = len(context) + sentence.index(colour)
            context += sentence
            qas.append(
                {
                    "id": f"a{a}q{q}",
                    "question": f"What colour is item {q} ?",
                    "answers": [{"answer_start": start, "text": colour}] * 2,
                }
            )
        data.append({"title": f"Article {a}", "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": "1.1", "data": data}


def write_squad_offline(root: Path) -> None:
    (root / "squad").mkdir(parents=True, exist_ok=True)
    (root / "squad" / "dev-v1.1.json").write_text(json.dumps(squad_file(10, 8)))
    seal(root)


def write_squad_canonical(cache: Path) -> None:
    (cache / "squad").mkdir(parents=True, exist_ok=True)
    (cache / "squad" / "train-v1.1.json").write_text(json.dumps(squad_file(6, seed=1)))
    (cache / "squad" / "dev-v1.1.json").write_text(json.dumps(squad_file(2, seed=2)))
    seal(cache)
