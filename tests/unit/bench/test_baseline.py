"""bench/baseline.py's pure helpers: state-transfer samples in source names, and judging a subset."""

from __future__ import annotations

from streamer.testing import Report, Sample, Violation, observe
from streamer.testing.checker import CUT, MONOTONIC, PHANTOM, PREFIX
from tests.unit.bench.loader import load_bench
from tests.unit.target import builders as b

baseline = load_bench("baseline")


def test_state_transfer_samples_are_renamed_to_source_names_and_carry_no_watermark() -> None:
    state = observe(b.table("st_db1", "t"), {"": [("f", "abc")]})
    sample = Sample("reader-0", 12.5, {"st_db1": 7}, {"st_db1.t": state, "st_db1.gone": None}, 40)
    renamed = baseline.renamed_sample(sample, baseline.ST)
    assert renamed == Sample("reader-0", 12.5, {}, {"db1.t": state, "db1.gone": None}, 40)


def test_judged_keeps_the_checks_asked_for_and_counts_the_rest() -> None:
    report = Report(samples=3, violations=[
        Violation(PREFIX, "r", 0, "x"), Violation(CUT, "r", 1, "y"), Violation(CUT, "r", 2, "z"),
        Violation(MONOTONIC, "r", 2, "w"),
    ])
    kept, left = baseline.judged(report, (PHANTOM, PREFIX, MONOTONIC))
    assert [v.check for v in kept] == [PREFIX, MONOTONIC]
    assert left == {CUT: 2}
