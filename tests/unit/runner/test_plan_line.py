"""The plan of a build from the stored compute times (``runner.plan``): a rerun's expected time, the dry run's line
of totals."""

from qkov_lib.runner.plan import Plan, format_plan, plan_line


def test_a_rerun_is_expected_to_take_its_last_wall_time_or_its_runs_spread_over_the_workers():
    assert Plan("a", "default", "code changed", 60.0, runs=5, compute_s=1200.0).expected_s(2) == 600.0
    assert Plan("a", "default", "code changed", 900.0, runs=5, compute_s=1200.0).expected_s(2) == 900.0
    assert Plan("a", "default", "code changed", None).expected_s(2) is None


def test_the_plan_line_counts_chapters_and_the_stored_runs_to_compute():
    plans = [
        Plan("a", "default", None, 30.0),
        Plan("b", "default", "code changed", 60.0, runs=5, compute_s=240.0),
        Plan("c", "default", "source changed", 10.0),
        Plan("d", "default", "code changed", 60.0, deferred=True, runs=3, compute_s=6000.0),
    ]
    assert plan_line(plans) == (
        "4 chapters: 1 current, 2 to run, 1 deferred (5 stored runs to compute, about 4 CPU-minutes by their "
        "stored compute times)"
    )
    table = format_plan(plans).splitlines()
    assert table[2].split()[4:8] == ["5", "runs,", "4", "CPU-min"] and table[-1] == plan_line(plans)
