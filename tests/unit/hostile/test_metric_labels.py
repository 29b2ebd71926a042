"""Odd database and table names never turn into metric labels: labels are bounded (db, event type).

Events with hostile names go through the real Applier (MemoryCatalog, tmp dirs); afterwards every
``streamer_*`` metric in ``streamer.metrics.REGISTRY`` has only the allowed label names, no table
name appears in any label value, and the exposition text still parses (values escaped correctly).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamer import metrics
from streamer.events.codec import tracked_db
from streamer.events.model import EventType
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.state.state_file import TargetState
from tests.unit.target import builders as b

pytestmark = pytest.mark.timeout(60)

# kind: the agent's error kinds; le: histogram buckets; python, version: streamer_build_info's
ALLOWED_LABELS = {"db", "event_type", "kind", "le", "python", "version", "via"}
ODD_TABLES = ['t"quote', "t\nnewline", "t{brace}", "t\\back", "tabl\u00e9_\u202e", "t=1,x=2", "x" * 300]
ODD_DB = 'db"{odd}\\'
INVALID_DB = "db\nforged"  # no metastore holds it: refused, and its halt's label is a bounded stand-in


def test_odd_names_stay_out_of_metric_labels(tmp_path: Path) -> None:
    state = TargetState(tmp_path / "state")
    applier = Applier(MemoryCatalog(), FileCopier(max_workers=1), TargetPaths(str(tmp_path / "wh")),
                      b.SOURCE_ID, state=state)
    events = [b.create_db(1, ODD_DB), b.create_db(100, INVALID_DB)]
    for i, name in enumerate(ODD_TABLES):
        snap = b.table(ODD_DB, name, location=f"file://{tmp_path}/src/{i}")
        ref = b.write_source_file(tmp_path / "src" / str(i), "f", b"x")
        events += [b.create_table(2 + 2 * i, snap), b.insert(3 + 2 * i, snap, [ref])]
    run_plan(applier, plan(events, applier.load_progress(), state.halts()), state)

    values: set[str] = set()
    for family in metrics.REGISTRY.collect():
        for sample in family.samples:
            assert set(sample.labels) <= ALLOWED_LABELS, f"{sample.name} has labels {sorted(sample.labels)}"
            values.update(sample.labels.values())
            if "via" in sample.labels:  # how a micro-batch was read: a fixed pair, never a name
                assert sample.labels["via"] in {"kafka", "spark"}, sample
            if "event_type" in sample.labels:
                assert sample.labels["event_type"] in {t.value for t in EventType}, sample
    for name in ODD_TABLES:
        assert not any(name in v for v in values), f"table name {name!r} became a label value"

    text = generate_latest(metrics.REGISTRY).decode()
    families = text_string_to_metric_families(text)
    dbs = {s.labels["db"] for f in families for s in f.samples if "db" in s.labels}
    assert ODD_DB.lower() in {d.lower() for d in dbs}, "the odd database name did not survive escaping"
    assert INVALID_DB not in dbs and tracked_db(INVALID_DB) in dbs, dbs
