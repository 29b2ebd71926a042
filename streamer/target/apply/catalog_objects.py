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
from streamer.target.apply.context import ApplyContext, object_name, payload_of
from streamer.target.apply.door import (
    AddConstraints,
    CreateFunction,
    DeleteStatistics,
    DropConstraint,
    DropFunction,
    UpdateStatistics,
)


def create_function(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, CreateFunctionPayload)
    fn = dataclasses.replace(
        payload.function, db=ctx.target_db(payload.function.db), name=payload.function.name.lower()
    )
    if fn.resource_uris:
        db_location = functions.database_source_location(ctx.check_owned(fn.db))
        fn = functions.copy_resources(ctx, fn, event.event_id, db_location)
    current = ctx.catalog.get_function(fn.db, fn.name)
    if current == fn:
        return
    if current is not None:
        ctx.do(DropFunction(fn.db, fn.name))
    ctx.do(CreateFunction(fn))


def drop_function(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, DropFunctionPayload)
    db, name = ctx.target_db(event.db or ""), payload.function_name.lower()
    if ctx.catalog.get_function(db, name) is not None:
        ctx.do(DropFunction(db, name))
    functions.remove_resources(ctx, db, name, event.event_id)


def add_constraints(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, AddConstraintsPayload)
    constraints = [
        dataclasses.replace(
            c,
            db=ctx.target_db(c.db),
            table=c.table.lower(),
            ref_db=ctx.target_db(c.ref_db) if c.ref_db else None,
        )
        for c in payload.constraints
    ]
    for key in dict.fromkeys((c.db, c.table, c.name) for c in constraints):
        ctx.do(DropConstraint(*key))  # a replay replaces instead of failing on "exists"
    if constraints:
        ctx.do(AddConstraints(constraints))


def drop_constraint(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, DropConstraintPayload)
    ctx.do(DropConstraint(ctx.target_db(payload.db), payload.table.lower(), payload.constraint_name))


def update_stats(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, UpdateColumnStatsPayload)
    ctx.do(UpdateStatistics(
        ctx.target_db(payload.db),
        payload.table.lower(),
        payload.partition_values or None,
        payload.statistics,
    ))


def delete_stats(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, DeleteColumnStatsPayload)
    ctx.do(DeleteStatistics(
        ctx.target_db(payload.db),
        payload.table.lower(),
        payload.partition_values or None,
        payload.column,
    ))


def unknown(ctx: ApplyContext, event: Event) -> None:
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
