"""Functions, constraints and column statistics: catalog objects without data of their own (a
function's resource jars are copied first, read only from the source's stores: the database's
recorded source location decides them when no ``--source-prefix`` does), and the UNKNOWN event
that halts its database. Design: docs/design/apply.md.
"""

from __future__ import annotations

import dataclasses

from streamer.errors import ApplyError
from streamer.events.model import (
    AddConstraintsPayload,
    CreateFunctionPayload,
    DeleteColumnStatsPayload,
    DropConstraintPayload,
    DropFunctionPayload,
    Event,
    UnknownPayload,
    UpdateColumnStatsPayload,
)
from streamer.target.apply import function_resources as functions
from streamer.target.apply.effects import (
    AddConstraints,
    CopyResources,
    CreateFunction,
    DeleteStatistics,
    DropConstraint,
    DropFunction,
    Effect,
    RemoveTree,
    UpdateStatistics,
)
from streamer.target.apply.view import View, object_name, payload_of


def create_function(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, CreateFunctionPayload)
    fn = dataclasses.replace(
        payload.function, db=view.target_db(payload.function.db), name=payload.function.name.lower()
    )
    effects: list[Effect] = []
    if fn.resource_uris:  # (ownership first: a foreign database is refused as such)
        db_location = functions.database_source_location(view.check_owned(fn.db))
        effects.append(CopyResources(event.event_id, fn, db_location))
    desired = functions.target_resources(view.paths, fn)
    current = view.function(fn.db, fn.name)
    if current == desired:
        return effects
    if current is not None:
        effects.append(DropFunction(fn.db, fn.name))
    return [*effects, CreateFunction(desired)]


def drop_function(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, DropFunctionPayload)
    db, name = view.target_db(event.db or ""), payload.function_name.lower()
    effects: list[Effect] = [DropFunction(db, name)] if view.function(db, name) is not None else []
    # a dropped function's copies go with it (absent is fine: a replay, or it had none)
    return [*effects, RemoveTree(event.event_id, functions.resource_dir(view.paths, db, name))]


def add_constraints(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, AddConstraintsPayload)
    constraints = [
        dataclasses.replace(
            c,
            db=view.target_db(c.db),
            table=c.table.lower(),
            ref_db=view.target_db(c.ref_db) if c.ref_db else None,
        )
        for c in payload.constraints
    ]
    # a replay replaces instead of failing on "exists"
    effects: list[Effect] = [DropConstraint(*key) for key in dict.fromkeys((c.db, c.table, c.name)
                                                                          for c in constraints)]
    return [*effects, AddConstraints(constraints)] if constraints else effects


def drop_constraint(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, DropConstraintPayload)
    return [DropConstraint(view.target_db(payload.db), payload.table.lower(), payload.constraint_name)]


def update_stats(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, UpdateColumnStatsPayload)
    return [UpdateStatistics(
        view.target_db(payload.db),
        payload.table.lower(),
        payload.partition_values or None,
        payload.statistics,
    )]


def delete_stats(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, DeleteColumnStatsPayload)
    return [DeleteStatistics(
        view.target_db(payload.db),
        payload.table.lower(),
        payload.partition_values or None,
        payload.column,
    )]


def unknown(view: View, event: Event) -> list[Effect]:
    """An event the source agent could not decode: its database halts here, by design."""
    payload = payload_of(event, UnknownPayload)
    fmt = payload.message_format or "no format"
    raise ApplyError(
        f"unknown source event type {payload.hive_event_type!r} ({fmt}, {len(payload.message)} bytes): "
        "this streamer cannot apply it; apply its change on the target by hand and `streamer target "
        "skip` it, or `streamer target retry` with a streamer that knows the type",
        event_type=payload.hive_event_type,
        obj=object_name(event),
    )
