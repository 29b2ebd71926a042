"""INSERT [OVERWRITE]: decided here (which directory, which files, replace or append), done by the
executor (``writes``: all files staged and verified, then published in one directory swap where the
filesystem allows, else renamed into place together and counted as non-atomic). Design:
docs/design/apply.md.
"""

from __future__ import annotations

from streamer.errors import ApplyError
from streamer.events.model import Event, InsertPayload, PartitionSnapshot
from streamer.target.apply.by_state import source_location
from streamer.target.apply.effects import Effect, RememberTable, SyncByState, WriteFiles
from streamer.target.apply.locations import partition_place
from streamer.target.apply.view import View, payload_of, table_for


def insert(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, InsertPayload)
    if payload.unlocated and not payload.files:
        return _unlocated(view, event, payload)
    table, source = table_for(view, event, payload.table)
    effects: list[Effect] = [RememberTable(table)]
    if payload.partition_values:
        part = payload.partition or PartitionSnapshot(values=payload.partition_values)
        target_dir, claim = partition_place(view.paths, table, part)
        if claim is not None:
            effects.append(claim)
        source_dir = part.sd.location
    else:
        target_dir = table.sd.location or ""
        source_dir = source.sd.location if source else None
    # a partition the event does not locate is read as part of its table's location
    read_location = source_dir or (source.sd.location if source else None)
    return [*effects, WriteFiles(event, payload.files, target_dir, source_dir, read_location, payload.replace,
                                 table, tuple(payload.partition_values))]


def _unlocated(view: View, event: Event, payload: InsertPayload) -> list[Effect]:
    """An INSERT the source agent could not locate (``InsertPayload.unlocated``): what it wrote is
    unknown, and applied as an empty append it would keep rows an INSERT OVERWRITE replaced. A table
    replicated by state syncs the object from the source's listing (``state_sync``, reading only
    below a declared ``--source-prefix``); any other halts its database at the event."""
    table, _ = table_for(view, event, payload.table)
    values = list(payload.partition_values)
    obj = table.qualified_name + (f" partition {values}" if values else "")
    if source_location(table):
        found = view.partition(table.db, table.name, values) if values else None
        if not values or found is not None:
            why = (f"INSERT without files into {obj} that the source agent could not locate; "
                   f"{table.qualified_name} is replicated by state: syncing it from the source")
            partitions = [found] if found is not None else None
            return [RememberTable(table), SyncByState(event, table, partitions, why)]
    raise ApplyError(
        "INSERT logged without files that the source agent could not locate (unlocated; its WARNING for "
        "this event says why): what it wrote is unknown (Hive 2.3 logs every INSERT OVERWRITE so), and "
        "applying it as an empty append would keep rows the source replaced. Compare the object with the "
        "source (streamer verify); if the replica already holds the source's rows, pass over the event "
        "with `streamer target skip`, else bootstrap the table again",
        event_id=event.event_id, event_type=event.event_type.value, obj=obj,
    )
