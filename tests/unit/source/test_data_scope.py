"""Seeds without data (``--metadata-only``, ``--exclude-external-data``): the withheld tables' files
leave the dump, every other part of the dump stays as it was."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamer.events.model import FileRef, PartitionSnapshot, TableSnapshot
from streamer.source.consolidate import Consolidated, Dump, TableDump
from streamer.source.data_scope import ALL_DATA, DataScope, is_external, withhold_data

_KINDS = st.sampled_from([("MANAGED_TABLE", {}), ("EXTERNAL_TABLE", {"EXTERNAL": "TRUE"}),
                          ("MANAGED_TABLE", {"EXTERNAL": "true"}), ("VIRTUAL_VIEW", {})])


@st.composite
def _states(draw: st.DrawFn) -> Consolidated:
    tables = {}
    for i, (kind, params) in enumerate(draw(st.lists(_KINDS, max_size=6))):
        n_files = draw(st.integers(0, 3))
        none: tuple[str, ...] = ()
        files = {none: {f"file:///t{i}/f{k}": FileRef(f"file:///t{i}/f{k}", size=k) for k in range(n_files)}}
        table = TableSnapshot(name=f"t{i}", db="d", table_type=kind, parameters=dict(params))
        parts = {none: PartitionSnapshot(values=[])}
        tables[("d", f"t{i}")] = TableDump(table, partitions=parts, files=files,
                                           write_ids=set(range(draw(st.integers(0, 2)))))
    return Consolidated(Dump(tables=tables), draw(st.integers(1, 10**6)))


@given(_states(), st.booleans(), st.booleans())
def test_only_the_withheld_tables_lose_their_files(state: Consolidated, metadata_only: bool,
                                                   external: bool) -> None:
    scope = DataScope(metadata_only, external)
    out = withhold_data(state, scope)
    assert out.event_id == state.event_id and out.dump.tables.keys() == state.dump.tables.keys()
    for key, before in state.dump.tables.items():
        after = out.dump.tables[key]
        withheld = metadata_only or (external and is_external(before.table))
        assert after.files == ({} if withheld else before.files)
        assert (after.table, after.partitions, after.write_ids) == (before.table, before.partitions,
                                                                    before.write_ids)
    assert withhold_data(state, ALL_DATA) == state


def test_external_as_hive_decides_it() -> None:
    assert is_external(TableSnapshot("t", "d", table_type="EXTERNAL_TABLE"))
    assert is_external(TableSnapshot("t", "d", table_type="MANAGED_TABLE", parameters={"EXTERNAL": "TRUE"}))
    assert not is_external(TableSnapshot("t", "d", table_type="MANAGED_TABLE"))
