"""The authors' HateXplain measurement (``measure = "authors"``): their padding is their read-out token, attention
is read at the last padded position, and sufficiency and comprehensiveness erase k% of the padded length. Checked
against a literal transcription of their ``compute_comprehensiveness_sufficiency_classification`` on a toy model
that, like theirs, reads its prediction at the first padding token."""

import numpy as np
import pytest
import torch

from qkov_lib.chapters import hatexplain
from qkov_lib.core.chapter import resolve
from qkov_lib.metrics.rationale import authors_faithfulness, authors_read, padded_as_readout

READOUT, T, C = 2, 16, 3
TABLE = torch.randn(40, C, generator=torch.Generator().manual_seed(0))


def toy(seen: list[int]) -> np.ndarray:
    """Class probabilities of the tokens a read-out sees (its own last), depending on tokens and positions."""
    logits = sum(TABLE[t] * np.cos(i + 1) for i, t in enumerate(seen))
    return torch.softmax(torch.as_tensor(logits), -1).numpy()


def theirs_predict(tokens: np.ndarray) -> np.ndarray:
    """Their model: the prediction at the first padding token (0), or at position 0 when there is none."""
    first = int((tokens == 0).argmax())
    return toy([READOUT if t == 0 else int(t) for t in tokens[: first + 1]])


def ours_predict(ids: torch.Tensor) -> torch.Tensor:
    """This model's read-out: the last non-padding position of each row, [S, B, T] -> [S, B, C]."""
    rows = ids.reshape(-1, ids.shape[-1])
    out = [toy(row[: int((row != 0).sum())].tolist()) for row in rows]
    return torch.tensor(np.array(out)).reshape(*ids.shape[:-1], C)


def theirs(tokens: np.ndarray, scores: np.ndarray, k_percent: float) -> tuple[float, float]:
    """HateXplain_Same_LR_Final_Config.ipynb cell 55, transcribed: (sufficiency, comprehensiveness)."""
    probs = theirs_predict(tokens)
    predicted, original = int(probs.argmax()), float(probs.max())
    k = max(1, int(np.ceil(0.01 * k_percent * len(tokens))))
    top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
    keep = [i for i in range(len(tokens)) if i not in set(top)]
    comp = original - theirs_predict(tokens[keep])[predicted]
    suff = original - theirs_predict(tokens[top])[predicted]
    return suff, comp


def test_padding_becomes_the_readout_token_up_to_the_padded_length():
    ids = torch.tensor([[5, 6, READOUT, 0], [7, READOUT, 0, 0]])
    padded = padded_as_readout(ids, 6, READOUT)
    assert padded.tolist() == [
        [5, 6, READOUT, READOUT, READOUT, READOUT],
        [7, READOUT, READOUT, READOUT, READOUT, READOUT],
    ]


def test_the_authors_model_reads_up_to_its_first_readout_or_the_first_token_alone():
    seq = torch.tensor([[5, 6, READOUT, 7, READOUT], [5, 6, 7, 8, 9]])
    assert authors_read(seq, READOUT).tolist() == [[5, 6, READOUT, 0, 0], [5, 0, 0, 0, 0]]


@pytest.mark.parametrize("k_percent", [5.0, 20.0, 50.0])
def test_sufficiency_and_comprehensiveness_match_the_authors_code_example_by_example(k_percent):
    gen = torch.Generator().manual_seed(1)
    rows, lengths = [], [3, 9, 14, 15]  # words per post; 15 leaves only the read-out as padding
    for n in lengths:
        words = torch.randint(3, 40, (n,), generator=gen)
        rows.append(torch.cat([words, torch.tensor([READOUT]), torch.zeros(T - n - 1, dtype=torch.long)]))
    ids = torch.stack(rows)[None]  # [1, B, T]
    padded = padded_as_readout(ids, T, READOUT)
    scores = torch.rand(1, len(lengths), T, generator=gen)
    scores[0, 2, -4:] = 5.0  # one post whose top positions include padding
    suff, comp = authors_faithfulness(ours_predict, padded, scores, [k_percent], READOUT, ours_predict(ids))
    for b in range(len(lengths)):
        tokens = padded[0, b].numpy().copy()
        tokens[tokens == READOUT] = 0  # their padding
        want_suff, want_comp = theirs(tokens, scores[0, b].double().numpy(), k_percent)
        assert float(suff[0, b]) == pytest.approx(want_suff, abs=1e-6)
        assert float(comp[0, b]) == pytest.approx(want_comp, abs=1e-6)


def test_official_hatexplain_measures_the_authors_way_and_default_the_companions():
    assert resolve(hatexplain, "official")[1].measure == "authors"
    assert resolve(hatexplain, "official")[1].k_percents == (5.0,)
    assert resolve(hatexplain, "default")[1].measure == "companion"
    with pytest.raises(ValueError, match="measure must be one of"):
        resolve(hatexplain, "default", {"measure": "theirs"})
