"""For random workloads, any set of readers of an in-order replica sees no violation."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from streamer.testing import Sample, check
from tests.unit.testing.replicas import dbs_of, temp_workload_run


# each example runs a real workload (~0.5 s): no shrinking, the failing seed is printed instead
@settings(
    max_examples=6,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(seed=st.integers(0, 10_000), n_events=st.integers(10, 40), data=st.data())
def test_in_order_replicas_never_violate(seed: int, n_events: int, data: st.DataObject) -> None:
    run = temp_workload_run(seed, n_events)
    h = run.history
    tables = h.tables()
    samples = []
    for reader in range(data.draw(st.integers(1, 3), label="readers")):
        keys = data.draw(st.lists(st.sampled_from(tables), min_size=1, unique=True), label="tables")
        points = sorted(data.draw(st.lists(st.sampled_from(h.event_ids), max_size=8), label="points"))
        applied = 0
        for e in points:
            # the event in flight: its effect is visible, the watermark may still name the one before
            behind = data.draw(st.booleans(), label="watermark behind")
            candidate = h.event_ids[h.event_ids.index(e) - 1] if behind and e != h.event_ids[0] else e
            applied = max(applied, candidate)
            wall = h.event_time(e) or 0.0
            samples.append(
                Sample(
                    reader=f"r{reader}",
                    wall_time=wall + 0.25,
                    applied_event_ids={db: applied for db in dbs_of(keys)},
                    tables={k: h.state_at(k, e) for k in keys},
                )
            )
    report = check(h, samples)
    assert report.ok, report.summary()
