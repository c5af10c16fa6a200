"""Real-data loaders (both layouts, the download path, bad input), tokenisation, the classifier and the metrics."""

import dataclasses
import gzip
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from fake_data import (
    seal,
    squad_file,
    write_hatexplain_canonical,
    write_hatexplain_offline,
    write_squad_canonical,
    write_squad_offline,
    write_sva_canonical,
    write_sva_offline,
)

from qkov_lib.chapters import hatexplain as hatexplain_chapter, hatexplain_layers, sva as sva_chapter
from qkov_lib.chapters import squad as squad_chapter
from qkov_lib.core.chapter import ParameterError
from qkov_lib.data import CACHE_ENV, DATA_ENV, hatexplain, pos_tags, registry, squad, sva
from qkov_lib.data.registry import DataError
from qkov_lib.data.text import TextSplit, Vocab, encode
from qkov_lib.metrics.rationale import erase, faithfulness, mass_metrics, readout_attention, rollout, top_tokens
from qkov_lib.metrics.verdicts import PERCENT, Interval
from qkov_lib.models.transformer import ClassifierConfig, classify, init_classifier, trim
from qkov_lib.present.plots import dtap_conditions
from qkov_lib.present.prose import fill
from qkov_lib.runner.catalog import resolve
from qkov_lib.runs import squad_runs
from qkov_lib.runs.real_verdicts import Majority, claims, compared, table1, why_not_learned
from qkov_lib.runs.real_data import run_conditions
from qkov_lib.present.table1 import (
    TABLE_METRICS,
    group_display,
    group_table,
    per_seed_display,
    short_names,
    table1_display,
    table1_page,
)
from qkov_lib.present.tables import folded
from qkov_lib.train.optim import circuit_groups


@pytest.fixture
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture
def canonical(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    return tmp_path


def test_hatexplain_offline_layout(offline):
    posts = write_hatexplain_offline(offline)
    splits, info = hatexplain.load()
    assert info["source"] == "offline copies"
    assert [len(splits[k]) for k in ("train", "validation", "test")] == [120, 12, 60]
    first = posts["test"][0]
    assert splits["test"].tokens[0] == first["tokens"] and splits["test"].labels[0] == first["labels"][0]
    rel = splits["test"].relevant[0]
    assert rel.sum() == 1 and first["tokens"][int(np.argmax(rel))] == "hateword"
    assert splits["test"].relevant[1] is None  # majority normal: no rationale
    assert all(r is None for r in splits["train"].relevant)


def test_hatexplain_canonical_layout_and_rules(canonical):
    write_hatexplain_canonical(canonical)
    splits, info = hatexplain.load()
    assert info["source"] == "canonical release" and len(splits["train"]) == 120
    assert splits["test"].relevant[0].sum() == 1
    assert hatexplain.relevance([[1, 0, 0], [0, 1, 0], [1, 0, 0]], 3, "majority", "x").tolist() == [True, False, False]
    assert hatexplain.relevance([[1, 0, 0], [0, 1, 0]], 3, "union", "x").tolist() == [True, True, False]
    assert hatexplain.majority([0, 1, 2]) is None and hatexplain.majority([2, 1, 2]) == 2


def test_the_download_path_uses_pooch_with_the_pinned_hash(canonical, monkeypatch):
    import pooch

    calls = []

    def fake_retrieve(url, known_hash, fname, path, progressbar, downloader):
        calls.append((url, known_hash))
        target = Path(path) / fname
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("{}")
        return str(target)

    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    path = registry.canonical_file("hatexplain", "post_id_divisions.json", download=True)
    assert path.read_text() == "{}"
    assert calls == [
        (
            registry.CANONICAL["hatexplain"]["post_id_divisions.json"].url,
            "sha256:" + registry.CANONICAL["hatexplain"]["post_id_divisions.json"].sha256,
        )
    ]
    registry.canonical_file("squad", "train-v1.1.json", download=True)  # SQuAD's published hash is pinned too
    assert calls[-1] == (
        "https://rajpurkar.github.io/SQuAD-explorer/dataset/train-v1.1.json",
        "sha256:3527663986b8295af4f7fcdff1ba1ff3f72d07d61a20f487cb238a6ef92fd955",
    )

    def failing(*args, **kwargs):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(pooch, "retrieve", failing)
    with pytest.raises(
        registry.DataUnavailable, match="the download from .*dataset.json failed: ConnectionError.*QKOV_DATA_DIR"
    ):
        registry.canonical_file("hatexplain", "dataset.json", download=True)

    def corrupt(*args, **kwargs):
        raise ValueError("SHA256 hash of downloaded file does not match the known hash")

    monkeypatch.setattr(pooch, "retrieve", corrupt)
    with pytest.raises(DataError, match="the download of .*dataset.json is corrupt"):
        registry.canonical_file("hatexplain", "dataset.json", download=True)


def test_sva_offline_and_canonical(offline, monkeypatch, tmp_path):
    write_sva_offline(offline)
    splits, info = sva.load(heldout_fraction=0.2)
    train, held, test = splits["train"], splits["heldout"], splits["test"]
    assert len(test) == 54 and set(test.groups) == {0, 1, 2}  # rows whose parse disagrees are dropped
    words, rel = test.tokens[0], test.relevant[0]
    assert words[int(np.argmax(rel))] in ("dog", "dogs") and len(words) == len(rel)
    assert [len(b) for b in test.backoff] == [len(t) for t in test.tokens]  # a tag per word
    test_prefixes = {tuple(t) for t in test.tokens}
    assert not test_prefixes & {tuple(t) for t in train.tokens + held.tokens}  # no test sentence trains
    pool = 200 + sum(10 + k for k in range(1, 6)) + 3
    dropped = int(info["train"].split(", ")[-1].split()[0])
    assert dropped >= 2 and len(train) + len(held) == pool - dropped  # the two planted test sentences at least
    for group in (sva.UNBINNED, 1, 2, 3, 4, 5):  # a fifth of each file held out
        n = int((train.groups == group).sum() + (held.groups == group).sum())
        assert (held.groups == group).sum() == round(0.2 * n)
    again, _ = sva.load(heldout_fraction=0.2)
    assert again["heldout"].tokens == held.tokens  # seeded
    monkeypatch.delenv(DATA_ENV)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "c"))
    write_sva_canonical(tmp_path / "c")
    splits, info = sva.load(train_fraction=0.2)
    assert len(splits["train"]) == 60 and len(splits["test"]) == 240 and "heldout" not in splits
    w, r = splits["train"].tokens[0], splits["train"].relevant[0]
    assert w[int(np.argmax(r))] in ("dog", "dogs")  # 1-based indices read correctly
    assert set(splits["test"].groups) == {0, 1, 2}


def test_sva_whole_sentences_keep_the_verb_mark_subject_and_verb_and_split_the_subset(offline):
    write_sva_offline(offline)
    splits, info = sva.load(heldout_fraction=0.2, sentences="whole")
    train, held, test = splits["train"], splits["heldout"], splits["test"]
    assert (len(train), len(held), len(test)) == (33, 9, 12)  # per group of 18: 4 tested, 3 of the 14 held out
    for split in (train, held, test):
        for words, rel, label in zip(split.tokens, split.relevant, split.labels):
            assert words[-1] == ("barks", "bark")[label]  # the verb is in the input
            assert [words[i] for i in np.flatnonzero(rel)] == [("dog", "dogs")[label], words[-1]]
    ids = [{tuple(t) + (str(g),) for t, g in zip(x.tokens, x.groups)} for x in (train, held, test)]
    assert sum(map(len, ids)) == len(ids[0] | ids[1] | ids[2])  # no sentence in two splits
    assert "whole" in info["sentences"] and "subject and the verb" in info["test"]
    with pytest.raises(ValueError, match="sentences must be one of"):
        sva.load(sentences="prefix")
    (offline / "sva" / "derived" / "linzen_testset_subjects.tsv").unlink()
    with pytest.raises(DataError, match="sentences = whole needs the offline colorlessgreen subset"):
        sva.load(sentences="whole")
    with pytest.raises(ParameterError, match="sentences"):
        resolve("sva", "smoke", {"sentences": "all"})


def test_a_replaced_word_matches_any_unseen_word_and_unknown_words_back_off_to_their_tag():
    pool = TextSplit(
        "p",
        [["the", "NN", "of", "dogs"], ["the", "NN"], ["a", "cat"]],
        np.array([0, 1, 0]),
        [None] * 3,
        np.array([1, 1, 1]),
    )
    test = TextSplit("t", [["the", "zebra", "of", "dogs"], ["the", "cat"]], np.array([0, 0]), [None, None])
    kept, dropped = sva._without_test(pool, test)  # "zebra" is unseen, so the first prefix may be that sentence
    assert dropped == 1 and kept.tokens == [["the", "NN"], ["a", "cat"]]
    vocab = Vocab([["the", "NN", "dog"]])
    assert vocab.ids(["the", "zebra", "yak"], ["DT", "NN", "XX"]) == [vocab.stoi["the"], vocab.stoi["NN"], 1]
    split = TextSplit("s", [["the", "zebra"]], np.array([0]), [None], backoff=[["DT", "NN"]])
    assert encode(split, vocab, 4).ids[0, :2].tolist() == [vocab.stoi["the"], vocab.stoi["NN"]]
    with pytest.raises(DataError, match="back-off tokens do not align"):
        TextSplit("s", [["the", "zebra"]], np.array([0]), [None], backoff=[["DT"]])


def test_tags_are_the_taggers_and_cached_once(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert pos_tags.tag([["the", "keys", "to", "the", "cabinet"]]) == [["DT", "NNS", "IN", "DT", "NN"]]
    source = tmp_path / "sentences.txt"
    source.write_text("a b\nc\n")
    calls = []
    monkeypatch.setattr(pos_tags, "tag", lambda s: calls.append(len(s)) or [["X"] * len(t) for t in s])
    sentences = [["a", "b"], ["c"]]
    assert pos_tags.cached_tags(source, sentences) == [["X", "X"], ["X"]] == pos_tags.cached_tags(source, sentences)
    assert calls == [2]  # the second call read the cache
    next((tmp_path / "tags").iterdir()).write_text("X")  # damaged: tagged again
    assert pos_tags.cached_tags(source, sentences) == [["X", "X"], ["X"]] and calls == [2, 2]


def test_squad_offline_splits_by_article_and_canonical_reads_train_and_dev(offline, monkeypatch, tmp_path):
    write_squad_offline(offline)
    splits, info = squad.load(test_fraction=0.4)
    train, test = splits["train"], splits["test"]
    assert len(train) == 48 and len(test) == 32 and "4 of 10 articles" in info["split"]
    assert not {q.article for q in train} & {q.article for q in test}  # no paragraph on both sides
    assert [q.article for q in squad.load(test_fraction=0.4)[0]["test"]] == [q.article for q in test]  # seeded
    q = test[0]
    assert q.context[q.starts[0] : q.starts[0] + len(q.answers[0])] == q.answers[0]
    monkeypatch.delenv(DATA_ENV)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "c"))
    with pytest.raises(DataError, match="squad data not available.*fetch squad"):
        squad.load()
    write_squad_canonical(tmp_path / "c")
    splits, info = squad.load()
    assert len(splits["train"]) == 24 and len(splits["test"]) == 8 and info["test"] == "dev-v1.1.json"


def test_squad_windows_hold_the_answer_at_a_random_place_and_the_trivial_baseline_is_scored():
    assert squad.tokenize("U.S.-led, 1945") == (
        ["u", ".", "s", ".", "-", "led", ",", "1945"],
        [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 8), (8, 9), (10, 14)],
    )
    long_answer = squad.Question("t", "a b c d e f", "q ?", ("b c d",), (2,))
    paragraph = " ".join(f"w{i}" for i in range(30)) + " red ."
    questions = [squad.Question("t", paragraph, "what ?", ("red",), (paragraph.index("red"),))] * 40
    ex, skipped = squad.examples(questions + [long_answer], window=8, max_question=1, max_answer=2, seed=0)
    assert skipped == 1 and len(ex) == 40 and all(len(e.context) == 8 and e.question == ["what"] for e in ex)
    assert all(e.text(*e.answer) == "red" for e in ex)  # the answer's own characters, from the paragraph
    assert len({e.answer for e in ex}) > 1  # the answer sits at more than one place in the window
    again, _ = squad.examples(questions, window=8, max_question=1, max_answer=2, seed=0)
    assert [e.answer for e in again] == [e.answer for e in ex]  # seeded
    fixed = [squad.Example(["x", "red", "y"], [(0, 1), (2, 5), (6, 7)], ["q"], (1, 2), "x red y", ("red",))] * 3
    assert squad_runs.fixed_span_baseline(fixed, fixed, max_answer=2) == {
        "start": 1,
        "length": 1,
        "EM": 100.0,
        "F1": 100.0,
    }


SQUAD_SMOKE = dict(
    seeds=[0, 1],
    download=False,
    test_fraction=0.2,
    data_seed=0,
    window=12,
    max_question=6,
    max_answer=3,
    max_train=None,
    max_test=None,
    min_freq=1,
    n_layers=2,
    d_model=16,
    n_heads=2,
    d_head=8,
    d_mlp=32,
    optimizer="adamw",
    lr=1e-2,
    qk_mult=20.0,
    batch_size=16,
    weight_decay=1e-4,
    epochs=2,
    evals_per_epoch=1,
    eval_batch=8,
    identity_weight=0.5,
    k_percents=[10.0, 50.0],
    erase="remove",
    threshold=0.1,
    confidence=0.1,
    bins=[0.0, 0.05, 0.1, 0.5, 1.0],
)


@pytest.mark.parametrize("output", ["vocabulary", "window"])
def test_squad_runs_score_generated_answers_and_attention_on_the_answer_span(offline, output):
    write_squad_offline(offline)
    p = squad_chapter.Setup(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in SQUAD_SMOKE.items()}, output=output
    )
    data = squad_runs.prepare(p)
    enc = data.test
    a = data.vocab.stoi["<a>"]
    assert (enc.prompts.gather(1, ((enc.prompts != 0).sum(1) - 1)[:, None]) == a).all()  # prompts end with <a>
    first = (enc.ids == a).int().argmax(1)
    assert (enc.ids[torch.arange(len(first)), first + 1] == enc.targets[:, 0]).all()  # the answer follows <a>
    assert enc.relevant.any(1).all() and not (enc.relevant & (enc.prompts == 0)).any()
    run = squad_runs.run_conditions(data, p, torch.device("cpu"), progress=False)
    assert list(run.per_seed.columns[:-1]) == ["seed", *squad_runs.QA_METRICS] and len(run.per_seed) == 4
    assert run.per_seed[["F1", "EM"]].apply(lambda c: c.between(0, 100)).all().all()
    assert all(m.shape == (2, 4, 4) for m in run.maps.values()) and run.by_group.empty
    table = claims(run.per_seed, performance="F1")
    assert table["id"].iloc[0] == "F1_comparable" and "leaves F1 unchanged" in table["claim"].iloc[0]
    shown = table1_display(table1(run.per_seed, metrics=squad_runs.QA_METRICS), metrics=squad_runs.QA_METRICS)
    assert list(shown.columns) == list(squad_runs.QA_METRICS)
    trivial = squad_chapter.baseline_display(data.baseline)  # plain words, the span's first word counted from 1
    assert list(trivial.columns) == [
        "first word of the span (window word)",
        "span length (words)",
        "exact match (%)",
        "F1 (%)",
    ]
    assert trivial.iloc[0, 0] == str(int(data.baseline["start"]) + 1)
    assert compared(run.per_seed, "squad").loc[("dev F1", "faster QK"), "this run"].endswith("\u00a0%")
    e = data.test_examples[0]
    golden = data.vocab.ids(e.context[e.answer[0] : e.answer[1]]) + [data.vocab.stoi["<eos>"]]
    assert squad_runs.answer_text(golden, e, data.vocab) == e.text(*e.answer)  # a window span: the paragraph's text
    unk = dataclasses.replace(e, context=["zyzzyva"] + e.context[1:])  # a window word outside the vocabulary
    assert squad_runs.answer_text([data.vocab.stoi["<unk>"]], unk, data.vocab) == e.text(0, 1)  # read at its place


def test_window_tokens_keep_each_window_token_once_then_eos():
    ids = torch.tensor([[5, 6, 5, 7, 4, 9, 2, 0], [8, 8, 4, 10, 2, 0, 0, 0]])  # window (up to 4), <q> = 4, ...
    assert squad.window_tokens(ids, q_id=4, eos=3, window=4).tolist() == [[5, 6, 0, 7, 3], [8, 0, 0, 0, 3]]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: d.update(version="2.0"), "not a SQuAD v1.1 file"),
        (lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start=1), "is not at offset 1"),
        (lambda d: d["data"][0]["paragraphs"][0].pop("context"), "lacks a SQuAD field"),
        (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].update(answers=[]), "has no answer"),
    ],
)
def test_a_damaged_squad_file_is_one_clear_error(offline, damage, message):
    data = squad_file()
    damage(data)
    (offline / "squad").mkdir(parents=True, exist_ok=True)
    (offline / "squad" / "dev-v1.1.json").write_text(json.dumps(data))
    seal(offline)
    with pytest.raises(DataError, match=message):
        squad.load()


def test_missing_data_is_one_clear_error(canonical):
    with pytest.raises(DataError, match="hatexplain data not available.*QKOV_DATA_DIR.*fetch hatexplain"):
        hatexplain.load()
    with pytest.raises(DataError, match="sva data not available"):
        sva.load()


def test_wrong_checksum_is_caught(offline):
    write_hatexplain_offline(offline)
    path = offline / "hatexplain" / "hatexplain_test.json"
    path.write_text(path.read_text().replace('"label": [0, 0, 1]', '"label": [1, 1, 0]'))  # labels flipped
    with pytest.raises(DataError, match="corrupt data file .*hatexplain_test.json: sha256 .* SHA256SUMS"):
        hatexplain.load()
    (offline / registry.MANIFEST).unlink()  # no manifest: the published hashes apply (and the fixture is not those)
    with pytest.raises(DataError, match="corrupt data file .*post_id_divisions.json: sha256 .* published"):
        hatexplain.load()


def test_truncated_json_is_caught(offline):
    write_hatexplain_offline(offline)
    path = offline / "hatexplain" / "hatexplain_test.json"
    path.write_text(path.read_text()[:-40])
    seal(offline)
    with pytest.raises(DataError, match="hatexplain_test.json line 60 is not valid JSON"):
        hatexplain.load()
    (offline / "hatexplain" / "post_id_divisions.json").write_text('{"train": [')
    seal(offline)
    with pytest.raises(DataError, match="post_id_divisions.json is not valid JSON"):
        hatexplain.load()


def test_rationale_length_mismatch_is_caught(offline):
    write_hatexplain_offline(offline)
    path = offline / "hatexplain" / "hatexplain_test.json"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[0]["rationales"][0] = records[0]["rationales"][0] + [0]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    seal(offline)
    with pytest.raises(DataError, match="rationale of length"):
        hatexplain.load()


def test_empty_split_and_corrupt_sva_are_caught(offline, tmp_path, monkeypatch):
    write_sva_offline(offline)
    (offline / "sva" / "rnn_agr_simple" / "numpred.val").write_text("")
    seal(offline)
    with pytest.raises(DataError, match="numpred.val holds no prefix"):
        sva.load()
    (offline / "sva" / "rnn_agr_simple" / "numpred.val").write_text("VBX\tthe dog\n")
    seal(offline)
    with pytest.raises(DataError, match="neither VBZ nor VBP"):
        sva.load()
    monkeypatch.delenv(DATA_ENV)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "c"))
    write_sva_canonical(tmp_path / "c")
    path = tmp_path / "c" / "sva" / "agr_50_mostcommon_10K.tsv.gz"
    path.write_bytes(path.read_bytes()[:60])
    seal(tmp_path / "c")
    with pytest.raises(DataError, match="truncated"):
        sva.load()


def test_text_split_and_encoding():
    split = TextSplit("x", [["a", "b", "c"], ["b"]], np.array([0, 1]), [np.array([False, True, True]), None])
    vocab = Vocab(split.tokens)
    enc = encode(split, vocab, max_len=3)
    assert enc.ids.tolist()[0][:2] == vocab.ids(["a", "b"]) and enc.ids[0, 2] == vocab.stoi["<readout>"]
    assert enc.relevant[0].tolist() == [False, True, False] and enc.has_relevance.tolist() == [True, False]
    assert enc.lengths.tolist() == [3, 2]
    with pytest.raises(DataError, match="relevance mask of length"):
        TextSplit("y", [["a"]], np.array([0]), [np.array([True, False])])
    with pytest.raises(ValueError, match="max_len"):
        encode(split, vocab, 1)


def test_classifier_masks_padding_and_reads_the_readout_position():
    cfg = ClassifierConfig(vocab=20, n_classes=3, max_len=8, d_model=8, n_heads=2, d_head=4)
    params = init_classifier(cfg, [0, 1])
    ids = torch.tensor([[5, 6, 2, 0, 0], [7, 8, 9, 2, 0]])
    logits, attns = classify(params, cfg, ids)
    assert logits.shape == (2, 2, 3) and attns[0].shape == (2, 2, 2, 1, 5)  # the last layer: the read-out row
    assert torch.all(attns[0][:, 0, :, :, 3:] == 0)  # padding gets no attention
    longer = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], 1)
    torch.testing.assert_close(classify(params, cfg, longer)[0], logits)  # padding changes nothing
    assert trim(longer)[0].shape[-1] == 4
    assert circuit_groups(params)["qk"] == ["blocks.0.W_Q", "blocks.0.W_K"]


def _every_row(params, cfg, ids):
    """The classifier computed at every position of every layer (no shortcut), read at the read-out position:
    logits [S, B, C] and full attention maps [S, B, H, T, T]."""
    x = params["embed"][:, ids] + params["pos"][:, None, : ids.shape[-1]]
    attns = []
    for layer in range(cfg.n_layers):
        w = {n: params[f"blocks.{layer}.{n}"] for n in ("W_Q", "W_K", "W_V", "W_O")}
        q, k, v = (torch.einsum("sbtd,shde->sbhte", x, w[n]) for n in ("W_Q", "W_K", "W_V"))
        scores = (q @ k.transpose(-1, -2) / cfg.d_head**0.5).masked_fill((ids == 0)[None, :, None, None], -torch.inf)
        attns.append(torch.softmax(scores, -1))
        out = torch.einsum("sbhte,shed->sbtd", attns[-1] @ v, w["W_O"])
        x = x + out if cfg.residual else out
        if cfg.mlp:
            w_in, w_out = params[f"blocks.{layer}.mlp_in"][:, None], params[f"blocks.{layer}.mlp_out"][:, None]
            x = x + torch.relu(x @ w_in) @ w_out
    last = (ids != 0).sum(-1) - 1
    read = x[:, torch.arange(ids.shape[0]), last]
    return read @ params["unembed"] + params["unembed_bias"][:, None], attns


@pytest.mark.parametrize("layers, residual, mlp", [(1, False, False), (2, True, True), (3, True, False)])
def test_reading_only_the_readout_row_at_the_last_layer_changes_nothing(layers, residual, mlp):
    cfg = ClassifierConfig(
        vocab=20,
        n_classes=3,
        max_len=8,
        d_model=8,
        n_heads=2,
        d_head=4,
        n_layers=layers,
        residual=residual,
        mlp=mlp,
        init_scale=0.5,
    )
    params = init_classifier(cfg, [0, 1])
    ids = torch.tensor([[5, 6, 2, 0, 0], [7, 8, 9, 4, 2]])
    logits, attns = classify(params, cfg, ids)
    full_logits, full = _every_row(params, cfg, ids)
    # float32 sums the two ways in other orders: logits of ~50 differ in the last bits (relative ~3e-6)
    torch.testing.assert_close(logits, full_logits, rtol=1e-5, atol=1e-5)
    # training reads the gradients: the same in float64 (in float32 they differ in the last bits, ~1e-4 here)
    wide = {k: v.detach().double().requires_grad_() for k, v in params.items()}
    weights = torch.randn(logits.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for mine, theirs in zip(
        *(
            torch.autograd.grad((f(wide, cfg, ids)[0] * weights).sum(), list(wide.values()))
            for f in (classify, _every_row)
        )
    ):
        torch.testing.assert_close(mine, theirs)
    for mine, theirs in zip(attns[:-1], full[:-1]):
        torch.testing.assert_close(mine, theirs)
    for w in (0.0, 0.5):  # the read-out row of the full rollout
        want = rollout(full, w)[:, torch.arange(2), (ids != 0).sum(-1) - 1]
        torch.testing.assert_close(readout_attention(attns, ids, w), want)


def test_rollout_erase_and_faithfulness():
    a = torch.tensor([[0.5, 0.5], [0.2, 0.8]])
    heads = torch.stack([a, a])  # [H, T, T]
    torch.testing.assert_close(rollout([heads]), a)
    torch.testing.assert_close(rollout([heads, heads], 0.0), a @ a)
    mixed = 0.5 * torch.eye(2) + 0.5 * a
    torch.testing.assert_close(rollout([heads], 0.5), mixed)
    ids = torch.tensor([[[4, 5, 6, 2, 0]]])
    scores = torch.tensor([[[0.1, 0.7, 0.2, 0.0, 0.0]]])
    top = top_tokens(scores, ids, 34.0)  # ceil(0.34 * 3) = 2 words
    assert top.tolist() == [[[False, True, True, False, False]]]
    assert erase(ids, top).tolist() == [[[4, 2, 0, 0, 0]]]
    only_first = torch.tensor([[[True, False, False, False, False]]])  # the positions that may be erased
    assert top_tokens(scores, ids, 100.0, only_first).tolist() == only_first.tolist()
    assert erase(ids, top, "mask").tolist() == [[[4, 1, 1, 2, 0]]]

    def predict(x):  # probability of class 1 = share of kept words equal to 5
        frac = ((x == 5).sum(-1) / (x > 2).sum(-1).clamp_min(1)).float()
        return torch.stack([1 - frac, frac], -1)

    suff, comp = faithfulness(predict, ids, scores, [34.0])
    assert suff.item() == pytest.approx((2 / 3) - 0.5) and comp.item() == pytest.approx(2 / 3 - 1.0)
    att = readout_attention([torch.eye(5)[3].expand(1, 1, 1, 1, 5)], ids[0])  # [S=1, B=1, H=1, 1, T]
    assert att.shape == (1, 1, 5) and att[0, 0, 3] == 1.0
    m = mass_metrics(torch.tensor([[0.6, 0.4]]), torch.tensor([[0.9, 0.9]]))
    assert m["MRTA"].item() == pytest.approx(50.0) and m["AC"].item() == 50.0 and m["ACMC"].item() == 50.0


def test_a_smoke_run_end_to_end_and_its_claims(offline, monkeypatch):
    write_hatexplain_offline(offline)
    p = resolve("hatexplain", "smoke", {"epochs": 3})[1]
    run = hatexplain_chapter.run(p, device=torch.device("cpu"), progress=False)
    data, per_seed = hatexplain_chapter.data(p), run.per_seed
    assert run.data.majority == data.majority and run.data.info == data.info  # what the page reads of the data
    assert set(per_seed["condition"]) == {"baseline", "faster QK (x30)"} and len(per_seed) == 4
    monkeypatch.setenv("QKOV_WORKERS", "1")  # both conditions in this process, with two torch threads outside
    torch.set_num_threads(2)
    alone = run_conditions(data, p, torch.device("cpu"), progress=False)
    pd.testing.assert_frame_equal(alone.per_seed, per_seed, check_exact=True)  # same numbers in any process
    pd.testing.assert_frame_equal(alone.curves, run.curves, check_exact=True)
    assert all(m.shape == (2, 5, 5) for m in run.maps.values()) and not run.curves.empty
    assert run.by_group.empty  # HateXplain has no groups
    fig = dtap_conditions(short_names(run.maps), p.bins, x_label="attention")  # Figure 7: a row per condition
    names = list(run.maps)
    assert list(short_names(run.maps)) == ["baseline", "faster QK"]
    assert [a.text for a in fig.layout.annotations][:4] == [
        "baseline:<br>mean",
        "baseline:<br>std. deviation",
        "faster QK:<br>mean",
        "faster QK:<br>std. deviation",
    ]
    np.testing.assert_allclose(fig.data[0].z, run.maps[names[0]].mean(0))
    np.testing.assert_allclose(fig.data[3].z, run.maps[names[1]].std(0, ddof=1))
    t = table1(per_seed)
    assert {"accuracy", "accuracy ±", "comprehensiveness ±"} <= set(t.columns)
    shown = table1_display(t)  # one "mean ± half-width" column per metric
    assert list(shown.columns) == list(TABLE_METRICS) and shown.loc["baseline", "accuracy"] == (
        f"{t['accuracy'].iloc[0]:.1f} ± {t['accuracy ±'].iloc[0]:.1f}"
    )
    page = table1_page(t)  # turned for a page column: a row per measure in plain words, a column per condition
    assert list(page.columns) == names and page.loc["accuracy (%)", "baseline"] == shown.loc["baseline", "accuracy"]
    assert list(page.index) == [
        "accuracy (%)",
        "MRTA (%)",
        "AC (%)",
        "ACMC (%)",
        "sufficiency (probability drop)",
        "comprehensiveness (probability drop)",
    ]
    one = table1_page(table1(per_seed[per_seed["seed"] == 0]))  # one seed: the mean alone, never "± nan"
    assert not one.map(lambda v: "nan" in v or re.search(r"-0\.0+(?![0-9])", v) is not None).any().any()
    seeds = per_seed_display(per_seed)
    assert len(seeds) == len(per_seed) and list(seeds.columns) == [
        "accuracy (%)",
        "MRTA (%)",
        "AC (%)",
        "ACMC (%)",
        "sufficiency",
        "comprehensiveness",
    ]
    assert list(seeds.index.get_level_values("condition").unique()) == ["baseline", "faster QK"]
    assert not any("_" in c for c in seeds.columns) and "NaN" not in folded(seeds, "Each seed").data
    three = compared(per_seed, "hatexplain")  # the paper, the authors' notebooks and this run, per stored key
    assert list(three.columns) == [
        "the paper",
        "the authors' notebooks",
        "this run",
        "this book under official",
        "informative?",
        "official gives the authors' number back?",
    ]
    assert three.loc[("test accuracy", "baseline"), "this run"].replace("\u00a0", " ") == (  # within [0, 100]
        Interval.of(per_seed.loc[per_seed["condition"] == names[0], "accuracy"], PERCENT).text(1) + " %"
    )
    assert three.loc[("AC", "baseline"), "the authors' notebooks"] == "not recorded"
    assert (compared(None, "hatexplain_layers")["this run"] == "not run").all()
    table = claims(per_seed)
    assert len(table) == 5 and set(table["verdict"]) <= {"holds", "fails", "undecided"}
    forged = per_seed.copy()
    forged.loc[forged["condition"] != "baseline", "AC"] += 10 + forged["seed"]
    assert claims(forged).set_index("id").loc["AC_rises", "verdict"] == "holds"
    flat = forged.assign(AC=forged["seed"] * 0.1)  # the same AC in both conditions: no rise
    assert claims(flat).set_index("id").loc["AC_rises", "verdict"] == "fails"
    n = data.test.labels.shape[0]
    assert (per_seed["examples"] == n).all() and data.majority == Majority.of(data.test.labels.numpy())
    assert np.allclose(100 * per_seed["correct"] / n, per_seed["accuracy"])  # the counts behind each accuracy
    assert per_seed["predicted_classes"].between(1, len(data.classes)).all()
    easy = forged.assign(correct=n, predicted_classes=len(data.classes))  # every test example right, every seed
    learned = claims(easy, floor=data.majority).set_index("id")["verdict"]
    assert learned["AC_rises"] == "holds"  # both conditions beat the majority class
    unlearned = claims(forged.assign(correct=data.majority.count), floor=data.majority)  # the majority's own count
    assert (unlearned["verdict"] == "not evidence").all() and unlearned["rule"].str.contains("does not beat").all()
    with pytest.raises(ValueError, match="counts"):  # an accuracy floor as a float is the trap the counts avoid
        claims(forged, floor=data.majority.share)


LABELS = np.array([0] * 31 + [1] * 19)  # 50 test examples, 31 of the majority class: a share of exactly 62%
FASTER = "faster QK (x30)"


def forged_per_seed(predictions: dict[str, list[np.ndarray]], labels: np.ndarray = LABELS) -> pd.DataFrame:
    """Per-seed results of two conditions from each seed's predicted classes on ``labels``, computed as
    ``evaluate_condition`` does (the accuracy a float32 mean), with attention metrics that favour faster QK."""
    rows = []
    for condition, runs in predictions.items():
        for seed, predicted in enumerate(runs):
            right = predicted == labels
            gain = 10.0 + 0.5 * seed if condition == FASTER else 0.0
            rows.append(
                {
                    "seed": seed,
                    "accuracy": 100 * float(torch.from_numpy(right).float().mean()),
                    "MRTA": 10.0 + seed + gain,
                    "AC": 10.0 + seed + gain,
                    "ACMC": 5.0 + seed + gain,
                    "sufficiency": 0.3 - 0.01 * (seed + gain),
                    "comprehensiveness": 0.3 + 0.01 * (seed + gain),
                    "examples": len(labels),
                    "correct": int(right.sum()),
                    "predicted_classes": len(np.unique(predicted)),
                    "condition": condition,
                }
            )
    return pd.DataFrame(rows)


def wrong_on(k: int, labels: np.ndarray = LABELS) -> np.ndarray:
    """Predictions right on every example but the first ``k`` of the minority class."""
    predicted = labels.copy()
    predicted[np.flatnonzero(labels == 1)[:k]] = 0
    return predicted


def test_a_model_that_predicts_the_majority_class_for_every_input_is_not_evidence():
    majority = Majority.of(LABELS)
    assert (majority.count, majority.examples, majority.share) == (31, 50, 62.0)
    good = [wrong_on(k) for k in (1, 2, 3)]  # 47-49 of 50 right: far above 31 of 50
    constant = np.zeros_like(LABELS)  # the majority class for every input
    forged = forged_per_seed({"baseline": [constant] * 3, FASTER: good})
    assert (forged.loc[forged["condition"] == "baseline", "accuracy"] > majority.share).all()  # float32: a hair above
    assert why_not_learned(forged[forged["condition"] == FASTER], majority) is None
    assert "predicts one class" in why_not_learned(forged[forged["condition"] == "baseline"], majority)
    table = claims(forged, floor=majority)
    assert (table["verdict"] == "not evidence").all()
    assert table["rule"].str.contains("the baseline models do not beat always predicting the majority class").all()
    assert set(claims(forged)["verdict"]) != {"not evidence"}  # without the floor the same rows give verdicts


def test_the_majority_count_or_one_more_correct_is_not_evidence_and_a_clear_margin_is():
    majority = Majority.of(LABELS)
    good = [wrong_on(k) for k in (1, 2, 3)]
    level = LABELS.copy()  # two classes predicted, exactly the majority's 31 of 50 right: one right, one wrong swap
    level[np.flatnonzero(LABELS == 1)[1:]] = 0  # 18 minority examples missed ...
    level[0] = 1  # ... and one majority example too: 31 right
    one_more = LABELS.copy()
    one_more[np.flatnonzero(LABELS == 1)[1:]] = 0  # 32 of 50 right: above the majority, not by a real margin
    for near, correct in ((level, 31), (one_more, 32)):
        forged = forged_per_seed({"baseline": [near, *good[1:]], FASTER: good})
        row = forged.iloc[0]
        assert (row["correct"], row["predicted_classes"]) == (correct, 2)
        table = claims(forged, floor=majority)
        assert (table["verdict"] == "not evidence").all() and table["rule"].str.contains("seed 0's").all()
        assert "binomial" in why_not_learned(forged[forged["condition"] == "baseline"], majority)
    clear = forged_per_seed({"baseline": good, FASTER: good})
    verdicts = claims(clear, floor=majority).set_index("id")["verdict"]
    assert "not evidence" not in set(verdicts) and verdicts["AC_rises"] == "holds"
    with pytest.raises(ValueError, match="same test set"):
        why_not_learned(clear, Majority(31, 60))


def test_constant_predictions_are_not_evidence_even_above_the_floor():
    labels = np.array([0] * 40 + [1] * 10)  # the test set's majority class at 80%
    floor = Majority(25, 50)  # a floor of 50%, as a balanced training set's share would give
    constant = np.zeros_like(labels)  # 40 of 50 right: far above the floor by the binomial test alone
    good = [wrong_on(k, labels) for k in (0, 1, 2)]
    forged = forged_per_seed({"baseline": [constant, *good[1:]], FASTER: good}, labels)
    assert forged.iloc[0]["correct"] == 40 and forged.iloc[0]["predicted_classes"] == 1
    table = claims(forged, floor=floor)  # one constant seed is enough: its pair says nothing
    assert (table["verdict"] == "not evidence").all()
    assert table["rule"].str.contains("seed 0 predicts one class for every test example").all()
    assert "not evidence" not in set(
        claims(forged_per_seed({"baseline": good, FASTER: good}, labels), floor=floor)["verdict"]
    )


def test_sva_accuracy_by_attractors(offline):
    write_sva_offline(offline)
    p = resolve("sva", "smoke", {"max_train": None, "max_test": None})[1]
    data = sva_chapter.data(p)
    run = run_conditions(data, p, torch.device("cpu"), progress=False)
    g = run.by_group
    assert set(g["split"]) == {"held-out", "test"} and len(set(g["condition"])) == 2
    held_all = g[(g["split"] == "held-out") & (g["group"] == "all")]
    assert len(held_all) == 4 and (held_all["examples"] == data.heldout.ids.shape[0]).all()
    test_all = g[(g["split"] == "test") & (g["group"] == "all")].set_index(["condition", "seed"])["accuracy"]
    per_seed = run.per_seed.set_index(["condition", "seed"])["accuracy"]
    assert np.allclose(test_all.sort_index(), per_seed.sort_index())  # the same predictions as Table 1's accuracy
    labels = data.test.labels.numpy()
    assert g[(g["split"] == "test") & (g["group"] == "all")]["majority"].iloc[0] == pytest.approx(
        100 * max(labels.mean(), 1 - labels.mean())
    )
    shown = group_table(g, sva.attractors)
    assert ("held-out", "not binned (numpred.val)") in shown.index and "majority class" in shown.columns
    readable_groups = group_display(g, sva.attractors, "attractors")
    assert readable_groups.index.names == ["split", "attractors"] and "majority class (%)" in readable_groups.columns
    assert [c for c in readable_groups.columns if c.endswith(": accuracy (%)")] == [
        f"{c}: accuracy (%)" for c in g["condition"].unique()
    ]
    read_back = pd.read_csv(io.StringIO(g.to_csv(index=False)))  # as a later reader of the results sees it
    pd.testing.assert_frame_equal(group_table(read_back, sva.attractors), shown)


def test_table5_runs_each_depth_with_its_own_rollout_and_names_the_depth_in_its_claims(offline, monkeypatch):
    write_hatexplain_offline(offline)
    p = resolve("hatexplain_layers", "smoke", {"layer_counts": [1, 2]})[1]
    assert p.n_layers == 2 and p.layer_counts == (1, 2)
    runs = hatexplain_layers.run(p, device=torch.device("cpu"), progress=False)
    assert list(runs) == [1, 2] and runs[1].data is runs[2].data  # loaded once, shared by every depth
    assert list(runs[1].data.uniform) == ["1", "2"]  # the uniform-attention MRTA of each depth
    one = run_conditions(hatexplain_chapter.data(p), p.at_depth(1), torch.device("cpu"), progress=False)
    pd.testing.assert_frame_equal(runs[1].per_seed, one.per_seed, check_exact=True)  # depth 1 = Table 1's run
    assert not runs[2].per_seed[list(TABLE_METRICS)].equals(runs[1].per_seed[list(TABLE_METRICS)])
    table = hatexplain_layers.table(runs)
    assert list(table["layers"]) == [1, 1, 2, 2] and list(table.columns[:2]) == ["layers", "condition"]
    assert list(hatexplain_layers.by_depth(runs, "per_seed")["layers"].unique()) == [1, 2]
    checked = hatexplain_layers.claims({n: run.per_seed for n, run in runs.items()})
    assert len(checked) == 10 and checked["id"].iloc[5] == "2_layers_accuracy_comparable"
    assert checked["claim"].iloc[5].startswith("2 layers: ")
    sentence = hatexplain_layers.dtap_sentence(list(runs))  # refers to one figure per depth this run trained
    assert sentence.startswith(
        "{numref}`fig-hatexplain_layers-dtap-1` and {numref}`fig-hatexplain_layers-dtap-2` show "
    )
    assert hatexplain_layers.dtap_sentence([2]).startswith("{numref}`fig-hatexplain_layers-dtap-2` shows ")
    shown = []  # (key, caption) of each figure the page would show
    monkeypatch.setattr(
        hatexplain_layers, "figure", lambda key, fig, caption, **v: shown.append((key, fill(caption, v)))
    )
    maps = {n: dtap_conditions(short_names(run.maps), p.bins, x_label="attention") for n, run in runs.items()}
    hatexplain_layers.dtap_figures(maps, "the measured posts", "30", 3)
    assert [key for key, _ in shown] == ["hatexplain_layers-dtap-1", "hatexplain_layers-dtap-2"]
    assert "models with one layer, on the measured posts," in shown[0][1] and "through the two layers " in shown[1][1]
    assert "learning rate 30 times" in shown[0][1] and "this run's 3 seeds" in shown[0][1]
    for bad in ([], [2, 2], [0], [1.5]):
        with pytest.raises(ParameterError, match="layer_counts"):
            resolve("hatexplain_layers", "default", {"layer_counts": bad})


def test_real_data_parameters_are_validated():
    with pytest.raises(ParameterError, match="rationale_rule"):
        resolve("hatexplain", "default", {"rationale_rule": "all"})
    with pytest.raises(ParameterError, match="k_percents"):
        resolve("sva", "default", {"k_percents": [0.0]})
    with pytest.raises(ParameterError, match="optimizer"):
        resolve("sva", "default", {"optimizer": "lion"})
    with pytest.raises(ParameterError, match="heldout_fraction"):
        resolve("sva", "default", {"heldout_fraction": 1.0})


def test_the_real_data_setup_checks_what_the_run_uses():
    """The validator is the setup's construction, and the run trains with the setup's own loop: weight decay on
    every circuit (not only the one the validator once checked), only W_Q and W_K faster."""
    setup = resolve("hatexplain", "default")[1]
    assert setup.seeds == (0, 1, 2, 3, 4) and setup.bins == (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    tc = setup.train_config(setup.qk_mult, per_epoch=100)
    assert tc.weight_decay == 1e-4
    assert tc.max_steps == setup.epochs * 100 and tc.schedule.qk_mult == 30.0
    assert setup.conditions() == [("baseline", 1.0), ("faster QK (x30)", 30.0)]
    with pytest.raises(ValueError, match="weight_decay"):
        dataclasses.replace(setup, weight_decay=-1.0)  # a setup is checked whenever it is built, replace included
    with pytest.raises(ValueError, match="epochs"):
        dataclasses.replace(setup, epochs=0)
    squad = resolve("squad", "default")[1]
    assert squad.max_len == squad.window + squad.max_question + 2 and squad.mlp and squad.residual
    with pytest.raises(ParameterError, match="output"):
        resolve("squad", "default", {"output": "span"})


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(momentum=0.9), "momentum is SGD's"),
        (dict(lr_schedule="linear"), "lr_schedule must be one of"),
        (dict(lr_schedule="onecycle", warmup=0.0), r"warmup must lie in \[0, 1\), and in \(0, 1\) for onecycle"),
        (dict(clip_norm=0.0), "clip_norm must be > 0"),
        (dict(qk_params="all"), "qk_params must be one of"),
        (dict(embed_mult=0.0), "embed_mult must be > 0"),
        (dict(faster_frozen="attention"), "faster_frozen must be one of none, mlp"),
        (dict(faster_weight_decay=-1e-3), "faster_weight_decay must be >= 0"),
        (dict(lr=0.0), "lr must be a finite number > 0"),
        (dict(qk_mult=float("inf")), "qk_mult must be a finite number > 0"),
        (dict(optimizer="lion"), "optimizer must be one of"),
        (dict(d_head=0), "d_head must be a positive integer"),
        (dict(activation="tanh"), "activation must be one of relu, gelu, gelu_tanh"),
    ],
)
def test_the_real_data_setup_checks_its_options_without_building_a_loop(change, message, monkeypatch):
    """A setup checks each training and model option itself (``training.check_loop``, ``transformer.check_shape``),
    with the messages the loop and the classifier give: no ``TrainConfig`` or ``ClassifierConfig`` is built only
    to be checked (issue: a setting travels as one object)."""
    from qkov_lib.runs import real_setup

    setup = resolve("hatexplain", "official")[1]

    def built(*args, **kwargs):
        raise AssertionError("a setup built a config only to check itself")

    monkeypatch.setattr(real_setup, "TrainConfig", built)
    monkeypatch.setattr(real_setup, "ClassifierConfig", built)
    dataclasses.replace(setup, seeds=(1, 2))  # a good setup builds neither
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(setup, **change)


def test_gzip_fixture_is_really_gzip(tmp_path):
    write_sva_canonical(tmp_path)
    with gzip.open(tmp_path / "sva" / "agr_50_mostcommon_10K.tsv.gz", "rt") as fh:
        assert fh.readline().startswith("sentence")


def test_the_training_loop_steps_as_torch_adamw_does_whatever_the_gradients_layout():
    """The real-data loop's fused AdamW equals ``torch.optim.AdamW``'s reference (one tensor at a time) on a
    classifier whose W_Q, W_K, W_O gradients come out of autograd in another memory layout than their parameters
    (a fused kernel fed those directly pairs parameters with the wrong gradient entries)."""
    from qkov_lib.train.optim import RateSchedule
    from qkov_lib.train.training import TrainConfig, optimiser, train

    cfg = ClassifierConfig(
        vocab=50,
        n_classes=3,
        max_len=16,
        d_model=16,
        n_heads=4,
        d_head=8,
        n_layers=2,
        mlp=True,
        d_mlp=32,
        residual=True,
    )
    start = init_classifier(cfg, [0, 1])
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randint(1, 50, (2, 8, 16), generator=gen), torch.randint(0, 3, (2, 8), generator=gen)

    def loss_fn(prm, ids, labels):
        return torch.nn.functional.cross_entropy(
            classify(prm, cfg, ids)[0].transpose(1, 2), labels, reduction="none"
        ).mean(1)

    grads = torch.autograd.grad(loss_fn(start, x, y).sum(), list(start.values()))
    assert not all(g.is_contiguous() for g in grads)  # the case a fused kernel gets wrong
    tc = TrainConfig(RateSchedule(1e-3, qk_mult=30.0), weight_decay=1e-4, max_steps=10, eval_every=5)
    ours = {k: v.detach().clone().requires_grad_() for k, v in start.items()}
    train(ours, loss_fn, tc, lambda step: (x, y), lambda prm: np.zeros(2), [0, 1], progress=False)
    ref = {k: v.detach().clone().requires_grad_() for k, v in start.items()}
    groups = optimiser(ref, tc).param_groups
    opt = torch.optim.AdamW(
        [{"params": g["params"], "lr": g["lr"], "weight_decay": g["weight_decay"]} for g in groups], foreach=False
    )
    for _ in range(10):
        opt.zero_grad()
        loss_fn(ref, x, y).sum().backward()
        opt.step()
    for k, v in ours.items():
        moved = (ref[k] - start[k]).abs().max()
        assert (v - ref[k]).abs().max() <= 1e-4 * moved, k
