"""``--db-map``: which target database replicates which source database, both ways. Pure.

The target's progress of a source database (``repl.last.id``) and its ownership checks live on the
database the source database is *mapped* to. Reading them back from the catalog must go the other
way exactly: a target database is the replica of a source database only when that source database
maps to it. A database that merely has a source database's name (``hr`` on the target while
``--db-map hr:hr7`` sends the source's ``hr`` to ``hr7``, e.g. left by an earlier run without the
map) replicates nothing of this job: its ``repl.last.id`` is not the progress of the source's ``hr``
(read as such, it made the planner drop ``hr``'s events as already applied), and this job never
changes it.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamer.errors import ApplyError


def normalized(db_map: Mapping[str, str] | None) -> dict[str, str]:
    """Source name -> target name, lower case (Hive's names are)."""
    return {k.lower(): v.lower() for k, v in (db_map or {}).items()}


def target_name(db_map: Mapping[str, str], source: str) -> str:
    """The target database of source database ``source`` (``db_map`` normalized)."""
    return db_map.get(source.lower(), source.lower())


def source_name(db_map: Mapping[str, str], target: str) -> str | None:
    """The source database whose replica target database ``target`` is, or None when it is none's:
    ``target`` is a source name ``db_map`` sends elsewhere, or several sources are mapped to it
    (``check_mapping`` halts their events). ``db_map`` normalized."""
    name = target.lower()
    mapped = [src for src, dst in db_map.items() if dst == name]
    if mapped:
        return mapped[0] if len(mapped) == 1 else None
    if name in db_map:  # the source database of that name is replicated into another database
        return None
    return name


def check_mapping(db_map: Mapping[str, str], source: str) -> str:
    """The target database of ``source``; ``ApplyError`` when another source database is mapped to
    the same one (its progress and objects would be mixed with theirs). ``db_map`` normalized."""
    name = source.lower()
    target = target_name(db_map, name)
    others = sorted(src for src, dst in db_map.items() if dst == target and src != name)
    if others:
        how = f"--db-map {name}:{target}" if name in db_map else "its own name (no --db-map of it)"
        raise ApplyError(
            f"source database {name!r} is replicated into target database {target!r} by {how}, and "
            f"--db-map also maps {', '.join(repr(o) for o in others)} there; refusing to mix two source "
            f"databases in one target database (give {name!r} a --db-map of its own)",
            obj=name,
        )
    return target
