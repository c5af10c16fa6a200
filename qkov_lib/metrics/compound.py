"""A claim made of parts that must all hold (``verdicts.every``: every panel, every attention value), each part
judged on its own: the claim's verdict, and why in words. The rule of such a claim speaks of all its parts ('ACMC of
(b) and of (d) lies at or above 50%'), so its failing clause alone would blame every part, those that hold too; the
reason names the parts that decide the verdict, with their numbers, and says which hold."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .verdicts import HOLDS, UNDECIDED, Interval, every


def clause(verdict: str, rule_text: str) -> str:
    """What a rule (``verdicts.rule``) says of a part with ``verdict``: 'lies below 50%' from 'fails if it lies below
    50%'; '' where the rule has no such clause."""
    for part in rule_text.split("; "):
        if part.startswith(f"{verdict} if it "):
            return part.removeprefix(f"{verdict} if it ")
    return ""


def each(
    named: Mapping[str, Interval],
    judge: Callable[[Interval], str],
    rule_text: str,
    digits: int = 1,
    signed: bool = False,
) -> tuple[str, str]:
    """The verdict of a claim whose every part (``named``: label -> interval) must hold by ``judge``, and why
    (empty when it holds: the rule says so): each deciding part with its interval and the rule's clause, then the
    parts that hold and, for a failure, those undecided. '(d) 12.3 [10.1, 14.5]: lies below 50%; (b) holds'."""
    words = {label: judge(interval) for label, interval in named.items()}
    verdict = every(words.values())
    if verdict == HOLDS:
        return verdict, ""
    said = clause(verdict, rule_text).split(" or the run has one seed")[0]
    deciding = [f"{k} {named[k].text(digits, signed)}: {said or verdict}" for k, w in words.items() if w == verdict]
    rest = [
        f"{', '.join(ks)} {word if len(ks) == 1 else {HOLDS: 'hold', UNDECIDED: 'undecided'}[word]}"
        for word in (HOLDS, UNDECIDED)
        if word != verdict and (ks := [k for k, w in words.items() if w == word])
    ]
    return verdict, "; ".join(deciding + rest)
