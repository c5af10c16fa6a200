"""What the summary decides beyond its headlines (those: tests/unit/chapters/test_summary.py): a sentence that
states an outcome is shown when this build's verdicts agree with it, marked unchecked when a chapter that decides
it did not run, and stops the build when they contradict it; on a hand-made scorecard table."""

import pandas as pd
import pytest

from qkov_lib.chapters import summary
from qkov_lib.metrics.verdicts import FAILS, HOLDS, UNDECIDED

CLAIMS = pd.DataFrame(
    [
        {"page": "theorem1", "id": "exact_instances", "verdict": HOLDS},
        {"page": "theorem1", "id": "assumptions_as_printed", "verdict": FAILS},
        {"page": "fig4_mu_trajectories", "id": "loss_to_zero", "verdict": UNDECIDED},
    ]
)
SENTENCE = "The theory checks out."


def verdicts(*keys: tuple[str, str]) -> list[str | None]:
    return [summary.verdict_of(CLAIMS, page, cid) for page, cid in keys]


def test_a_sentence_is_shown_when_every_verdict_agrees_with_it():
    assert verdicts(("theorem1", "exact_instances"), ("theorem1", "assumptions_as_printed")) == [HOLDS, FAILS]
    assert summary.agree(verdicts(("theorem1", "assumptions_as_printed")), FAILS) is True
    assert summary.guarded(SENTENCE, summary.agree(verdicts(("theorem1", "exact_instances")), HOLDS)) == SENTENCE


def test_a_sentence_whose_chapter_did_not_run_is_marked_unchecked():
    unchecked = verdicts(("theorem1", "exact_instances"), ("lemma3", "mu_ov_bounds"))
    assert unchecked == [HOLDS, None] and summary.agree(unchecked, HOLDS) is None
    assert summary.guarded(SENTENCE, None) == f"{SENTENCE} (This build did not run the chapter that checks it.)"


def test_a_sentence_the_verdicts_contradict_stops_the_build_naming_it():
    contradicted = summary.agree(
        verdicts(("theorem1", "exact_instances"), ("fig4_mu_trajectories", "loss_to_zero")), HOLDS
    )
    assert contradicted is False  # an undecided part is no agreement
    with pytest.raises(AssertionError, match=r"The theory checks out.*rewrite the sentence"):
        summary.guarded(SENTENCE, contradicted)
