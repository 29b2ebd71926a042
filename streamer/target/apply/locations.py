"""Location-bearing parameters moved to the target, as the object's ``location`` is.

Spark keeps a datasource table's real location in its storage descriptor's serde parameter ``path``
(and a partition's likewise); other writers keep URIs in table, storage or serde parameters too. Left
as the source wrote them, the replica's readers would read the source, and after a failover its
writers would write into it. So every parameter value that is a URI on a source filesystem is
rewritten: one at or below the object's source location to the same place below its target location,
any other to its place below the external base dir (where an external table with that location would
live; no data is copied there). Without an external base dir such a value cannot be placed and is
refused with a ``PathEscapeError`` naming the parameter, so that nothing points at the source silently.

Pure string work on snapshots; the handlers (``tables``, ``partitions``) call it on what they write.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from streamer.errors import PathEscapeError
from streamer.events.model import PartitionSnapshot, StorageDescriptor, TableSnapshot
from streamer.target.apply.effects import ClaimExternal
from streamer.target.apply.paths import EXTERNAL_TYPES, TargetPaths, partition_name, same_filesystem
from streamer.target.apply.sources import STORE_SCHEMES


def is_source_uri(value: str) -> bool:
    """Whether a parameter value is a URI on a filesystem a source keeps data on (``file:/x``,
    ``hdfs://nn/x``, ``s3a://b/x``); bare paths and other text are not (a delimiter, a comment)."""
    if "://" not in value and not value.lower().startswith("file:/"):
        return False
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    return bool(scheme) and scheme in STORE_SCHEMES and parts.path.startswith("/")


def _same_filesystem(a: str, b: str) -> bool:
    """``same_filesystem``, hosts compared as DNS does (``hdfs://NN`` is ``hdfs://nn``)."""
    pa, pb = urlsplit(a.strip()), urlsplit(b.strip())
    return same_filesystem(pa._replace(netloc=pa.netloc.lower()).geturl(),
                           pb._replace(netloc=pb.netloc.lower()).geturl())


Places = Sequence[tuple[str | None, str | None]]
"""(source location, target location) pairs an object's parameters may name, the object's own first
(a partition's parameters may name its table's directory too: Spark copies the table's ``path``)."""


def rewrite_value(paths: TargetPaths, value: str, places: Places, what: str) -> str:
    """``value`` as the target holds it: moved to the same place below the target location of the
    first of ``places`` whose source location holds it, else below the external base dir; ``what``
    names the parameter in errors."""
    uri = value.strip()
    path = urlsplit(uri).path.rstrip("/")
    for source_location, target_location in places:
        if not (source_location and target_location and _same_filesystem(uri, source_location)):
            continue
        base = urlsplit(source_location).path.rstrip("/")
        if path == base:
            return target_location
        if path.startswith(base + "/"):
            rel = paths.relative_file(path[len(base) + 1 :], what)
            return paths.ensure_inside(target_location.rstrip("/") + "/" + rel, what)
    if paths.external is None:
        raise PathEscapeError(
            f"parameter {what} names {value}, a source location outside its object's, and the target "
            "has no --external-base-dir to place it under: refusing to leave it pointing at the source",
            obj=what,
        )
    return paths.external_location(uri, what)


def rewrite_parameters(
    paths: TargetPaths, params: Mapping[str, str], places: Places, what: str
) -> dict[str, str]:
    """``params`` with every source URI value rewritten (``rewrite_value``); other values kept."""
    return {
        key: rewrite_value(paths, value, places, f"{what} {key}") if is_source_uri(value) else value
        for key, value in params.items()
    }


def _rewrite_sd(paths: TargetPaths, sd: StorageDescriptor, places: Places, what: str) -> StorageDescriptor:
    serde = dataclasses.replace(
        sd.serde, parameters=rewrite_parameters(paths, sd.serde.parameters, places, f"{what} serde")
    )
    stored = rewrite_parameters(paths, sd.parameters, places, f"{what} storage")
    return dataclasses.replace(sd, serde=serde, parameters=stored)


def table_locations(paths: TargetPaths, target: TableSnapshot, source_location: str | None) -> TableSnapshot:
    """A target table (its ``sd.location`` already the target's) with its location-bearing
    parameters moved along: ``source_location`` is where the source keeps it."""
    what, places = target.qualified_name, [(source_location, target.sd.location)]
    return dataclasses.replace(
        target,
        sd=_rewrite_sd(paths, target.sd, places, what),
        parameters=rewrite_parameters(paths, target.parameters, places, what),
    )


def partition_locations(
    paths: TargetPaths, target: PartitionSnapshot, source_location: str | None, what: str,
    table: tuple[str | None, str | None] = (None, None),
) -> PartitionSnapshot:
    """A target partition (``sd.location`` the target's) with its location-bearing parameters moved;
    ``table``: its table's source and target locations, which its parameters may name too."""
    places = [(source_location, target.sd.location), table]
    return dataclasses.replace(
        target,
        sd=_rewrite_sd(paths, target.sd, places, what),
        parameters=rewrite_parameters(paths, target.parameters, places, what),
    )


def moved_parameters(params: Mapping[str, str], old: str, new: str) -> dict[str, str]:
    """``params`` with each URI value at or below ``old`` moved to the same place below ``new`` (a
    rename moves a table's directory: its partitions' parameters follow)."""
    base = urlsplit(old).path.rstrip("/")
    out = {}
    for key, value in params.items():
        if (is_source_uri(value) or value.startswith("/")) and _same_filesystem(value, old):
            path = urlsplit(value.strip()).path.rstrip("/")
            if path == base or path.startswith(base + "/"):
                value = new.rstrip("/") + path[len(base) :]
        out[key] = value
    return out


def moved_partition(p: PartitionSnapshot, moves: list[tuple[str, str]]) -> PartitionSnapshot:
    """Partition ``p`` with its parameters (table, storage, serde) moved by each (old, new) pair."""
    serde, stored, params = p.sd.serde.parameters, p.sd.parameters, p.parameters
    for old, new in moves:
        serde = moved_parameters(serde, old, new)
        stored = moved_parameters(stored, old, new)
        params = moved_parameters(params, old, new)
    sd = dataclasses.replace(p.sd, serde=dataclasses.replace(p.sd.serde, parameters=serde), parameters=stored)
    return dataclasses.replace(p, sd=sd, parameters=params)


def partition_place(
    paths: TargetPaths, table: TableSnapshot, p: PartitionSnapshot
) -> tuple[str, ClaimExternal | None]:
    """Target directory of partition ``p`` of ``table`` (a target snapshot), and, for an external
    partition with a location of its own, the claim placing it there (``external_owners``)."""
    keys = [c.name for c in table.partition_keys]
    if table.table_type in EXTERNAL_TYPES:
        if p.sd.location:
            target = paths.external_location(p.sd.location, table.qualified_name)
            return target, ClaimExternal(p.sd.location, target, table.qualified_name)
        base = table.sd.location or ""
        return paths.ensure_inside(base.rstrip("/") + "/" + partition_name(keys, p.values)), None
    return paths.partition_location(table.db, table.name, keys, p.values), None
