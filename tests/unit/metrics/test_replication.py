"""The report's mark, [Re] or [¬Re], from the headline verdicts (``verdicts.replication``)."""

import pytest

from qkov_lib.metrics.verdicts import (
    FAILS,
    HOLDS,
    NOT_EVIDENCE,
    NOT_REPLICATED,
    REPLICATED,
    UNDECIDED,
    replication,
)


def test_more_than_half_holding_and_none_failing_is_a_replication():
    assert replication([HOLDS, HOLDS, UNDECIDED]) == REPLICATED
    assert replication([HOLDS]) == REPLICATED


def test_one_failing_claim_is_not_a_replication_however_many_hold():
    assert replication([HOLDS] * 9 + [FAILS]) == NOT_REPLICATED


def test_exactly_half_holding_is_not_more_than_half():
    assert replication([HOLDS, HOLDS, UNDECIDED, NOT_EVIDENCE]) == NOT_REPLICATED
    assert replication([HOLDS, HOLDS, HOLDS, UNDECIDED, NOT_EVIDENCE]) == REPLICATED


def test_no_verdicts_or_an_unknown_word_is_refused():
    with pytest.raises(ValueError, match="headline verdicts"):
        replication([])
    with pytest.raises(ValueError, match="'maybe'"):
        replication([HOLDS, "maybe"])
