"""States compare what replication must preserve and ignore what a target legitimately changes."""

from __future__ import annotations

import dataclasses

import pytest

from streamer.events.model import Column, StorageDescriptor, TableSnapshot
from streamer.replay.state import diff
from streamer.testing import observe, table_meta, table_state

TABLE = TableSnapshot(
    name="t",
    db="d",
    sd=StorageDescriptor(location="file:/src/d.db/t", columns=[Column("id", "BIGINT")]),
    partition_keys=[Column("dt", "string")],
    parameters={"comment": "x", "transient_lastDdlTime": "1", "numFiles": "3"},
)


def test_target_bookkeeping_and_locations_do_not_matter() -> None:
    on_target = dataclasses.replace(
        TABLE,
        sd=dataclasses.replace(TABLE.sd, location="file:/target/d.db/t", columns=[Column("ID", "bigint")]),
        parameters={
            "comment": "x",
            "transient_lastDdlTime": "99",
            "repl.last.id": "5",
            "streamer.source.id": "s",
        },
    )
    files = {"dt=1": [("000000_0", "aa"), ("000001_0", "bb")]}
    source = observe(TABLE, files)
    target = observe(on_target, {"dt=1": [("000001_0", "bb"), ("000000_0", "aa")]})
    assert source is not None and target is not None
    assert source.fingerprint == target.fingerprint and diff(source, target) == "equal"


def test_content_and_metadata_matter() -> None:
    base = observe(TABLE, {"dt=1": [("000000_0", "aa")]})
    other_checksum = observe(TABLE, {"dt=1": [("000000_0", "ab")]})
    empty_partition_added = observe(TABLE, {"dt=1": [("000000_0", "aa")], "dt=2": []})
    altered = observe(dataclasses.replace(TABLE, parameters={"comment": "y"}), {"dt=1": [("000000_0", "aa")]})
    prints = {s.fingerprint for s in (base, other_checksum, empty_partition_added, altered) if s}
    assert len(prints) == 4
    assert "metadata differs in parameters" in diff(altered, base)
    assert "partitions extra ['dt=2']" in diff(empty_partition_added, base)
    assert diff(None, base) == "absent vs present"


def test_unpartitioned_tables_always_have_their_one_partition() -> None:
    flat = table_meta(dataclasses.replace(TABLE, partition_keys=[]))
    assert table_state(flat) == table_state(flat, {"": []})
    with pytest.raises(ValueError, match="partition names"):
        table_state(flat, {"dt=1": []})
    with pytest.raises(ValueError, match="outside any partition"):
        table_state(table_meta(TABLE), {"": []})


def test_write_ids_count_only_for_transactional_tables() -> None:
    acid = table_meta(dataclasses.replace(TABLE, parameters={"transactional": "true"}))
    plain = table_meta(TABLE)
    assert table_state(acid, {}, [2, 1, 2]).write_ids == (1, 2)
    assert table_state(plain, {}, [1]).write_ids == ()
