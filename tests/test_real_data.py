"""Real-data loaders (both layouts, the download path, bad input), tokenisation, the classifier and the metrics."""
import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from fake_data import (seal, write_hatexplain_canonical, write_hatexplain_offline, write_sva_canonical,
                       write_sva_offline)

from qkov_lib import claims
from qkov_lib.data import CACHE_ENV, DATA_ENV, hatexplain, registry, sva
from qkov_lib.data.registry import DataError
from qkov_lib.data.text import TextSplit, Vocab, encode
from qkov_lib.metrics.rationale import erase, faithfulness, mass_metrics, readout_attention, rollout, top_tokens
from qkov_lib.models.transformer import ClassifierConfig, classify, init_classifier, trim
from qkov_lib.optim import circuit_groups
from qkov_lib.profiles import ParameterError, resolve
from qkov_lib.real_data import TABLE_METRICS, prepare, run_conditions, table1, table1_display


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
    assert calls == [(registry.CANONICAL["hatexplain"]["post_id_divisions.json"].url,
                      "sha256:" + registry.CANONICAL["hatexplain"]["post_id_divisions.json"].sha256)]

    def failing(*args, **kwargs):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(pooch, "retrieve", failing)
    with pytest.raises(registry.DataUnavailable, match="the download from .*dataset.json failed: ConnectionError.*"
                                                       "QKOV_DATA_DIR"):
        registry.canonical_file("hatexplain", "dataset.json", download=True)

    def corrupt(*args, **kwargs):
        raise ValueError("SHA256 hash of downloaded file does not match the known hash")

    monkeypatch.setattr(pooch, "retrieve", corrupt)
    with pytest.raises(DataError, match="the download of .*dataset.json is corrupt"):
        registry.canonical_file("hatexplain", "dataset.json", download=True)


def test_sva_offline_and_canonical(offline, monkeypatch, tmp_path):
    write_sva_offline(offline)
    splits, info = sva.load()
    assert len(splits["train"]) == 200 and len(splits["test"]) == 54  # rows whose parse disagrees are dropped
    words, rel = splits["test"].tokens[0], splits["test"].relevant[0]
    assert words[int(np.argmax(rel))] in ("dog", "dogs") and len(words) == len(rel)
    monkeypatch.delenv(DATA_ENV)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "c"))
    write_sva_canonical(tmp_path / "c")
    splits, info = sva.load(train_fraction=0.2)
    assert len(splits["train"]) == 60 and len(splits["test"]) == 240
    w, r = splits["train"].tokens[0], splits["train"].relevant[0]
    assert w[int(np.argmax(r))] in ("dog", "dogs")  # 1-based indices read correctly


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
    with pytest.raises(DataError, match="train split is empty"):
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
    x = params["embed"][:, ids] + params["pos"][:, None, :ids.shape[-1]]
    attns = []
    for layer in range(cfg.n_layers):
        w = {n: params[f"blocks.{layer}.{n}"] for n in ("W_Q", "W_K", "W_V", "W_O")}
        q, k, v = (torch.einsum("sbtd,shde->sbhte", x, w[n]) for n in ("W_Q", "W_K", "W_V"))
        scores = (q @ k.transpose(-1, -2) / cfg.d_head**0.5).masked_fill((ids == 0)[None, :, None, None], -torch.inf)
        attns.append(torch.softmax(scores, -1))
        out = torch.einsum("sbhte,shed->sbtd", attns[-1] @ v, w["W_O"])
        x = x + out if cfg.residual else out
        if cfg.mlp:
            x = x + torch.relu(x @ params[f"blocks.{layer}.mlp_in"][:, None]) @ params[f"blocks.{layer}.mlp_out"][:, None]
    last = (ids != 0).sum(-1) - 1
    read = x[:, torch.arange(ids.shape[0]), last]
    return read @ params["unembed"] + params["unembed_bias"][:, None], attns


@pytest.mark.parametrize("layers, residual, mlp", [(1, False, False), (2, True, True), (3, True, False)])
def test_reading_only_the_readout_row_at_the_last_layer_changes_nothing(layers, residual, mlp):
    cfg = ClassifierConfig(vocab=20, n_classes=3, max_len=8, d_model=8, n_heads=2, d_head=4, n_layers=layers,
                           residual=residual, mlp=mlp, init_scale=0.5)
    params = init_classifier(cfg, [0, 1])
    ids = torch.tensor([[5, 6, 2, 0, 0], [7, 8, 9, 4, 2]])
    logits, attns = classify(params, cfg, ids)
    full_logits, full = _every_row(params, cfg, ids)
    torch.testing.assert_close(logits, full_logits)
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
    _, p = resolve("hatexplain", "smoke", {"epochs": 3})
    data = prepare("hatexplain", p)
    per_seed, maps, curves = run_conditions(data, p, torch.device("cpu"), progress=False)
    assert set(per_seed["condition"]) == {"baseline", "faster QK (x30)"} and len(per_seed) == 4
    monkeypatch.setenv("QKOV_WORKERS", "1")  # both conditions in this process, with two torch threads outside
    torch.set_num_threads(2)
    alone = run_conditions(data, p, torch.device("cpu"), progress=False)
    pd.testing.assert_frame_equal(alone[0], per_seed, check_exact=True)  # same numbers in any process, any threads
    pd.testing.assert_frame_equal(alone[2], curves, check_exact=True)
    assert all(m.shape == (2, 5, 5) for m in maps.values()) and not curves.empty
    t = table1(per_seed)
    assert {"accuracy", "accuracy ±", "comprehensiveness ±"} <= set(t.columns)
    shown = table1_display(t)  # one "mean ± half-width" column per metric
    assert list(shown.columns) == list(TABLE_METRICS) and shown.loc["baseline", "accuracy"] == (
        f"{t['accuracy'].iloc[0]:.1f} ± {t['accuracy ±'].iloc[0]:.1f}")
    table = claims.table1(per_seed)
    assert len(table) == 5 and table["reproduced"].dtype == bool
    forged = per_seed.copy()
    forged.loc[forged["condition"] != "baseline", "AC"] += 10 + forged["seed"]
    assert claims.table1(forged).set_index("claim").loc["AC rises with faster QK", "reproduced"]


def test_real_data_parameters_are_validated():
    with pytest.raises(ParameterError, match="rationale_rule"):
        resolve("hatexplain", "default", {"rationale_rule": "all"})
    with pytest.raises(ParameterError, match="k_percents"):
        resolve("sva", "default", {"k_percents": [0.0]})
    with pytest.raises(ParameterError, match="optimizer"):
        resolve("sva", "default", {"optimizer": "lion"})


def test_gzip_fixture_is_really_gzip(tmp_path):
    write_sva_canonical(tmp_path)
    with gzip.open(tmp_path / "sva" / "agr_50_mostcommon_10K.tsv.gz", "rt") as fh:
        assert fh.readline().startswith("sentence")
