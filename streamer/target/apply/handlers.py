"""Which handler decides each event type: one table instead of a dispatch method, so the applier
and the bootstrap share the same handlers. Each is a pure function of the event and the target's
view (``view.View``) returning effects (``effects``); the applier wraps a step's in its batch's mode
(``step_effects``) and ``executor.run`` does them through the door. Design: docs/design/apply.md.
"""

from __future__ import annotations

from collections.abc import Callable

from streamer.errors import ApplyError
from streamer.events.model import Event, EventType
from streamer.target.apply import catalog_objects, data, databases, partitions, tables, transactions
from streamer.target.apply.effects import Effect
from streamer.target.apply.view import View, object_name

Decider = Callable[[View, Event], list[Effect]]

DECIDERS: dict[EventType, Decider] = {
    EventType.CREATE_DATABASE: databases.create_database,
    EventType.ALTER_DATABASE: databases.alter_database,
    EventType.DROP_DATABASE: databases.drop_database,
    EventType.CREATE_TABLE: tables.create_table,
    EventType.ALTER_TABLE: tables.alter_table,
    EventType.DROP_TABLE: tables.drop_table,
    EventType.CREATE_FUNCTION: catalog_objects.create_function,
    EventType.DROP_FUNCTION: catalog_objects.drop_function,
    EventType.ADD_PRIMARYKEY: catalog_objects.add_constraints,
    EventType.ADD_FOREIGNKEY: catalog_objects.add_constraints,
    EventType.ADD_UNIQUECONSTRAINT: catalog_objects.add_constraints,
    EventType.ADD_NOTNULLCONSTRAINT: catalog_objects.add_constraints,
    EventType.ADD_DEFAULTCONSTRAINT: catalog_objects.add_constraints,
    EventType.ADD_CHECKCONSTRAINT: catalog_objects.add_constraints,
    EventType.DROP_CONSTRAINT: catalog_objects.drop_constraint,
    EventType.UPDATE_TABLE_COLUMN_STAT: catalog_objects.update_stats,
    EventType.UPDATE_PARTITION_COLUMN_STAT: catalog_objects.update_stats,
    EventType.DELETE_TABLE_COLUMN_STAT: catalog_objects.delete_stats,
    EventType.DELETE_PARTITION_COLUMN_STAT: catalog_objects.delete_stats,
    EventType.INSERT: data.insert,
    EventType.ADD_PARTITION: partitions.add_partition,
    EventType.ALTER_PARTITION: partitions.alter_partition,
    EventType.ALTER_PARTITIONS: partitions.alter_partitions,
    EventType.DROP_PARTITION: partitions.drop_partition,
    EventType.RELOAD: tables.reload_table,
    EventType.OPEN_TXN: transactions.open_txn,
    EventType.ACID_WRITE: transactions.acid_write,
    EventType.COMMIT_TXN: transactions.commit_txn,
    EventType.ABORT_TXN: transactions.abort_txn,
    EventType.UNKNOWN: catalog_objects.unknown,
}


# Events that change nothing on a target (their effect arrives with a later event, or never).
NO_OPS = frozenset(
    {
        EventType.ALLOC_WRITE_ID,
        EventType.COMMIT_COMPACTION,
        EventType.PROGRESS,
    }
)


def decide(view: View, event: Event) -> list[Effect]:
    """The event's effects; none for a no-op; an event type with no handler is refused."""
    handler = DECIDERS.get(event.event_type)
    if handler is not None:
        return handler(view, event)
    if event.event_type in NO_OPS:
        return []
    raise ApplyError(f"event type {event.event_type} is not supported by this target", obj=object_name(event))
