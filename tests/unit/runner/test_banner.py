"""The banner under a page's title: the commits its stored runs were computed at, named when few, counted when
many."""

from qkov_lib.runner import execute


def stored(commits: list[str]) -> dict:
    return {"runs": 20, "commits": commits, "compute_s": 600.0, "from_store": 20}


def test_a_few_commits_are_named():
    banner = execute.banner({"profile": "official", "stored_runs": stored(["a" * 40, "b" * 40 + "+dirty"])})
    assert "its 20 stored runs computed at `aaaaaaaaaaaa`, `bbbbbbbbbbbb+dirty` (10.0 min of compute" in banner


def test_many_commits_are_counted_and_the_command_that_names_them_is_given():
    banner = execute.banner({"profile": "official", "stored_runs": stored([c * 40 for c in "abcdef"])})
    assert (
        "computed at 6 commits (10.0 min of compute; 20 of them read from the store; `python -m qkov_lib results "
        "status` names each run's commit)" in banner
    )
    assert "aaaaaaaaaaaa" not in banner


def test_a_page_that_judges_claims_opens_with_their_tally_linked_to_its_claims_section(tmp_path):
    import nbformat
    import pandas as pd

    from qkov_lib.core.results import save

    claims = pd.DataFrame({"id": list("abcdef"), "verdict": ["holds"] * 3 + ["fails", "undecided", "holds"]})
    save(tmp_path, "sva", {"claims": claims}, {"profile": "default"})
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Table 1\n\nIntro."),
            nbformat.v4.new_markdown_cell("Before.\n\n## The claims, checked\n\nThe rule."),
        ]
    )
    nbformat.write(nb, tmp_path / "sva.ipynb")
    execute.add_banner(tmp_path, "sva")
    page = nbformat.read(tmp_path / "sva.ipynb", as_version=4)
    title = page.cells[0].source.splitlines()
    assert title[0] == "# Table 1"
    assert (
        title[2] == "**Verdict: 4 of 6 claims hold; 1 fails, 1 undecided**, each with its reason in {ref}`sva-claims`."
    )
    assert title[4].startswith("*This page was run with profile `default`")
    assert page.cells[1].source == "Before.\n\n(sva-claims)=\n## The claims, checked\n\nThe rule."
    assert execute.verdict_line(claims.iloc[:1], "x").startswith("**Verdict: 1 of 1 claim holds**")
