"""The portable mode's committed reference: the sha256 of the smoke real-data chapters' result tables (on the tests'
own fake datasets) and of a short real-data training, made in portable mode. ``tests/integration/test_portable.py`` recomputes
them on every run, so every machine that runs the tests checks that it reproduces them bit for bit.

When a deliberate change moves these numbers, regenerate the file in the same commit::

    make portable-reference        # = .venv/bin/python tests/portable_reference.py
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected" / "portable.json"
CHAPTERS = ("hatexplain", "hatexplain_layers", "sva", "squad")  # the real-data chapters
TEXT_TABLES = ("claims",)  # tables of words, not numbers: a rewording is not a change of arithmetic


def table_digests(results: Path) -> dict[str, str]:
    """The sha256 of every numeric result table of the real-data chapters in a profile's results folder."""
    out = {}
    for chapter in CHAPTERS:
        for path in sorted(results.glob(f"{chapter}.*csv")):
            stem = path.name.removesuffix(".csv")
            if stem.split(".", 1)[-1] not in TEXT_TABLES:
                out[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def training_digests() -> dict[str, str]:
    """The short trainings of ``test_portable`` (30 AdamW steps of the classifier, one of the SQuAD decoder), each
    in a fresh process in portable mode."""
    sys.path.insert(0, str(HERE / "integration"))
    from test_portable import TRAIN, _python

    run = _python(TRAIN, {"QKOV_PORTABLE": "1"})
    return {"classifier": run["classifier"], "decoder": run["decoder"]}


def main() -> None:
    """Run the smoke real-data chapters on the fake datasets in portable mode, and write the reference."""
    sys.path.insert(0, str(HERE))
    import os

    from fake_data import write_all_offline

    os.environ["QKOV_PORTABLE"] = "1"
    from qkov_lib.runner.reproduce import reproduce

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["QKOV_DATA_DIR"] = str(write_all_offline(Path(tmp) / "data"))
        summary = reproduce("smoke", only=list(CHAPTERS), out_dir=Path(tmp) / "nb", results_root=Path(tmp) / "res")
        if summary.failures or summary.no_data:
            raise SystemExit(f"the chapters did not run: {summary}")
        reference = {"tables": table_digests(Path(tmp) / "res" / "smoke"), "trainings": training_digests()}
    EXPECTED.write_text(json.dumps(reference, indent=2, sort_keys=True) + "\n")
    print(f"wrote {EXPECTED.relative_to(HERE.parent)}: {len(reference['tables'])} tables, 2 trainings")


if __name__ == "__main__":
    main()
