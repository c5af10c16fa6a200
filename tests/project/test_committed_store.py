"""The committed results store (``data/store``): every file accounted for by its folder's manifest, every stored run
intact under its seal, only the committed profiles, plain CSV and JSON, within its size budget."""

from qkov_lib.core.paths import STORE_ROOT
from qkov_lib.runs import store, store_verify


def test_every_committed_file_is_named_by_a_manifest_and_sealed():
    assert store_verify.verify(STORE_ROOT) == []


def test_only_the_committed_profiles_in_plain_csv_and_json_within_the_budget():
    files = [p for p in STORE_ROOT.rglob("*") if p.is_file()]
    assert {p.relative_to(STORE_ROOT).parts[0] for p in files} <= set(store.STORED_PROFILES)
    assert {p.suffix for p in files} <= {".csv", ".json"}
    size_mb = sum(p.stat().st_size for p in files) / 1e6
    assert size_mb <= store.BUDGET_MB, f"the committed store holds {size_mb:.1f} MB, over its {store.BUDGET_MB} MB"
