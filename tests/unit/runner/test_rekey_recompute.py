"""``results rekey --recompute`` (``runner.rekey_recompute``): stale runs re-keyed only where a recomputation of one
run of their computation gives its files byte for byte, and only in their setup and code parts."""

import pandas as pd
import pytest

from qkov_lib.core import files
from qkov_lib.core.chapter import Scope, scoped
from qkov_lib.runner import rekey_recompute
from qkov_lib.runs import store, store_modes, store_verify
from qkov_lib.runs.store import Batch, Piece
from tests.unit.runs.test_store import CALLS, roots  # noqa: F401 (roots: the store of the test's own)


def runs(seeds, scale=1.0, setting=None):
    """Stand-in training runs; ``setting``, when given, joins each run's values (a new parameter)."""
    extra = {} if setting is None else {"setting": setting}
    pieces = [Piece(f"cond-seed{s}", {"seed": s, "scale": 1.0} | extra) for s in seeds]
    batch = Batch(pieces, ["qkov_lib.metrics.stats"])
    todo = batch.missing

    def fn(seed):
        CALLS.append(seed)
        return pd.DataFrame({"seed": [seed], "value": [scale * seed / 3]})

    batch.compute(fn, [(seeds[i],) for i in todo], 1, lambda t, out: {todo[t]: {"main": out}})
    return batch.tables()


@pytest.mark.usefixtures("roots")
def test_a_setting_that_computes_the_same_is_re_keyed_after_one_run_comes_back_byte_for_byte(tmp_path):
    with scoped(Scope("tiny", "default")):
        runs([1, 2, 3])
    folder = tmp_path / "store" / "default" / "tiny"
    states = store_modes.plan(lambda: runs([1, 2, 3], setting=False), Scope("tiny", "default"))
    assert [(s.state, s.why) for s in states] == [("stale", ("setup (setting: null -> false)",))] * 3
    check = store_modes.recheck(
        lambda: runs([1, 2, 3], setting=False), Scope("tiny", "default"), frozenset({"cond-seed1"}), stale=True
    )
    assert CALLS == [1, 2, 3, 1] and check.outcomes == {"cond-seed1": ""}  # one run recomputed, the same
    for name in ("cond-seed1", "cond-seed2", "cond-seed3"):
        assert rekey_recompute.rekey_run(folder, name, *check.keys[name], "cond-seed1 recomputed")
    store_verify.write_manifest(folder)
    states = store_modes.plan(lambda: runs([1, 2, 3], setting=False), Scope("tiny", "default"))
    assert [s.state for s in states] == ["current"] * 3 and CALLS == [1, 2, 3, 1]
    meta = files.check(folder, "cond-seed2")
    assert meta["values"]["setting"] is False and meta["rekeyed"]["why"] == "cond-seed1 recomputed"
    assert store_verify.verify(tmp_path / "store") == []


@pytest.mark.usefixtures("roots")
def test_a_run_that_comes_back_different_says_so_and_a_data_change_is_never_re_keyed(tmp_path):
    with scoped(Scope("tiny", "default")):
        runs([1, 2])
    check = store_modes.recheck(
        lambda: runs([1, 2], scale=2.0, setting=True), Scope("tiny", "default"), frozenset({"cond-seed1"}), stale=True
    )
    assert check.outcomes == {"cond-seed1": "files differ: cond-seed1.csv"}
    folder = tmp_path / "store" / "default" / "tiny"
    key, values = check.keys["cond-seed2"]
    other = store.Key(key.parts | {"data": "0" * 64}, key.code, key.computed_by)
    assert not rekey_recompute.rekey_run(folder, "cond-seed2", other, values, "no")  # data moved: never
    assert "rekeyed" not in files.check(folder, "cond-seed2")
    assert rekey_recompute.computation("variant0-faster-seed1234") == "variant0-faster"
