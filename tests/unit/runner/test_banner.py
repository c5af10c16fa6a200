"""The banner under a page's title: the commits its stored runs were computed at, named when few, counted when
many."""

from qkov_lib.runner import execute


def stored(commits: list[str]) -> dict:
    return {"runs": 20, "commits": commits, "compute_s": 600.0, "from_store": 20}


def test_a_few_commits_are_named():
    banner = execute.banner({"profile": "official", "stored_runs": stored(["a" * 40, "b" * 40 + "+dirty"])})
    assert "its 20 training runs computed at `aaaaaaaaaaaa`, `bbbbbbbbbbbb+dirty` (10.0 min of compute" in banner


def test_many_commits_are_counted_and_the_command_that_names_them_is_given():
    banner = execute.banner({"profile": "official", "stored_runs": stored([c * 40 for c in "abcdef"])})
    assert (
        "computed at 6 commits (10.0 min of compute; 20 of them read from the store; `python -m qkov_lib results "
        "status` names each run's commit)" in banner
    )
    assert "aaaaaaaaaaaa" not in banner
