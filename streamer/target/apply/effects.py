"""What a handler decides, as data: the effects an event has on the target, in the order they run.

A handler (``databases``, ``tables``, ``catalog_objects``) is a function of the event and the target's
view of its objects (``view.View``) that returns a list of these; it does no I/O. The executor
(``executor.run``) does them one after another, each through the door (``door``): the same checks of
ownership, names, places and bounds for every kind, whoever decided it. Three families:

- **catalog effects**, one kind per catalog write method (``CatalogEffect``);
- **file effects**: copy a record's files into an object's directory and publish them, clear, relocate
  or remove a directory, sync a table replicated by state, copy a function's resources, claim an
  external directory (``FileEffect``);
- **bookkeeping** of the target job itself: ACID write ids, what the batch remembers of a table, which
  tables are replicated by state, a dropped database's series (``Bookkeeping``);
- **progress**, which no handler decides: the batch's mode wraps a step's effects in them
  (``step_effects.around``): a regrouped step's fence, the journal's sync rule, what the batch forgets,
  and the step's ``repl.last.id`` (``Progress``).

Design: docs/design/apply.md ("The door").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streamer.events.model import (
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    Event,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    TableSnapshot,
)


# --- catalog effects --------------------------------------------------------------------------------
@dataclass(frozen=True)
class CreateDatabase:
    db: DatabaseSnapshot


@dataclass(frozen=True)
class AlterDatabase:
    """Also a progress marker (``repl.last.id``) or a fence: a database's parameters change."""

    name: str
    db: DatabaseSnapshot
    exists: bool = False  # read in this batch: the catalog may skip its own existence check


@dataclass(frozen=True)
class DropDatabase:
    name: str


@dataclass(frozen=True)
class CreateTable:
    table: TableSnapshot


@dataclass(frozen=True)
class AlterTable:
    """``table`` under another name or database than ``db.name`` is a rename."""

    db: str
    name: str
    table: TableSnapshot


@dataclass(frozen=True)
class DropTable:
    db: str
    name: str


@dataclass(frozen=True)
class AddPartitions:
    table: TableSnapshot  # the target's table they belong to (their places are judged against it)
    partitions: Sequence[PartitionSnapshot]


@dataclass(frozen=True)
class AlterPartitions:
    table: TableSnapshot
    partitions: Sequence[PartitionSnapshot]


@dataclass(frozen=True)
class PutPartitions:
    """``AddPartitions`` in one call; when some exist already (a replay after a crash), those are made
    equal (``AlterPartitions``) and the rest added."""

    table: TableSnapshot
    partitions: Sequence[PartitionSnapshot]


@dataclass(frozen=True)
class DropPartitions:
    db: str
    table: str
    values: Sequence[Sequence[str]]
    keys: Sequence[str] | None = None  # the table's partition keys, when known (spares a read)


@dataclass(frozen=True)
class CreateFunction:
    function: FunctionSnapshot


@dataclass(frozen=True)
class DropFunction:
    db: str
    name: str


@dataclass(frozen=True)
class AddConstraints:
    constraints: Sequence[Constraint]


@dataclass(frozen=True)
class DropConstraint:
    db: str
    table: str
    name: str


@dataclass(frozen=True)
class UpdateStatistics:
    db: str
    table: str
    partition_values: Sequence[str] | None
    statistics: Sequence[ColumnStatistic]


@dataclass(frozen=True)
class DeleteStatistics:
    db: str
    table: str
    partition_values: Sequence[str] | None
    column: str | None


CatalogEffect = (
    CreateDatabase | AlterDatabase | DropDatabase | CreateTable | AlterTable | DropTable | AddPartitions
    | AlterPartitions | DropPartitions | CreateFunction | DropFunction | AddConstraints | DropConstraint
    | UpdateStatistics | DeleteStatistics
)


# --- file effects -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClaimExternal:
    """Place ``table`` (target ``db.table``) in external directory ``target_dir``: refused when another
    source owns it, or ``source_location`` is on no declared store (``external_owners``)."""

    source_location: str
    target_dir: str
    table: str


@dataclass(frozen=True)
class PublishFiles:
    """Copy ``refs`` into ``target_dir`` (each at its path relative to ``source_dir``), verified against
    their checksums and read as the source rules allow against ``read_location`` (default
    ``source_dir``), then publish them."""

    event_id: int
    refs: Sequence[FileRef]
    target_dir: str
    source_dir: str | None
    read_location: str | None = None


@dataclass(frozen=True)
class ClearDir:
    """Remove the files of ``directory`` (a TRUNCATE)."""

    event_id: int
    directory: str
    recursive_files: bool = True


@dataclass(frozen=True)
class RelocateDir:
    """Give ``new`` the tree of ``old`` (a managed rename): linked where the filesystem can, else
    moved. A linked ``old`` stays until a later ``RemoveTree(old, if_linked=True)``."""

    event_id: int
    old: str
    new: str


@dataclass(frozen=True)
class RemoveTree:
    """Remove ``directory`` and everything below it (absent is fine); ``if_linked``: only when an
    earlier ``RelocateDir`` of this list linked it."""

    event_id: int
    directory: str
    if_linked: bool = False


@dataclass(frozen=True)
class FileCopy:
    """One event's files of one directory: ``refs`` into ``target_dir`` as ``PublishFiles`` says;
    ``partition`` is the target partition they belong to, if any (synced instead when they are gone
    from the source of a table replicated by state)."""

    event: Event
    refs: Sequence[FileRef]
    target_dir: str
    source_dir: str | None
    read_location: str | None
    partition: PartitionSnapshot | None = None


@dataclass(frozen=True)
class PublishTogether:
    """Stage every copy (verified; a failure discards all staged and fails), then publish them all: a
    partition directory stays invisible until the metastore lists it, a transaction's files until
    its commit. With ``table`` (replicated by state), a partition's copy whose files are gone from its
    source is left to the next ``SyncGone``."""

    table: TableSnapshot | None
    copies: Sequence[FileCopy]


@dataclass(frozen=True)
class SyncGone:
    """Sync, from the source, the partitions of ``table`` whose files an earlier ``PublishTogether``
    found gone (after the catalog lists them)."""

    table: TableSnapshot


@dataclass(frozen=True)
class MoveDir:
    """Move the tree of ``old`` to ``new`` (a managed partition's rename)."""

    event_id: int
    old: str
    new: str


@dataclass(frozen=True)
class WriteFiles:
    """An INSERT [OVERWRITE] into ``target_dir``, a directory of ``table`` (the target's; of its
    partition ``partition_values``): ``refs`` staged and verified as ``PublishFiles`` says, then
    published in one directory swap where the filesystem allows, else renamed into place together
    (``replace``: the files not staged removed after) and counted as non-atomic. Files gone from the
    source of a table replicated by state: the directory synced from the source instead."""

    event: Event
    refs: Sequence[FileRef]
    target_dir: str
    source_dir: str | None
    read_location: str | None
    replace: bool
    table: TableSnapshot
    partition_values: Sequence[str] = ()


@dataclass(frozen=True)
class SyncByState:
    """Make every directory of ``table`` (a target table replicated by state), or of its
    ``partitions`` (target partitions) only, equal to the source's."""

    event: Event
    table: TableSnapshot
    partitions: Sequence[PartitionSnapshot] | None = None
    reason: str | None = None  # why, when it is not the ALTER that changed the files (logged)


@dataclass(frozen=True)
class CopyResources:
    """Copy function ``function``'s (the source's) resources into the target's tree; ``db_location``
    is where the source keeps its database (the read rules derive the allowed stores from it)."""

    event_id: int
    function: FunctionSnapshot
    db_location: str | None


FileEffect = (
    ClaimExternal | PublishFiles | PublishTogether | SyncGone | WriteFiles | ClearDir | MoveDir | RelocateDir
    | RemoveTree | SyncByState | CopyResources
)


# --- order ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Refuse:
    """Stop here with ``error``: the effects before it are done (a merged step whose later event
    cannot be applied fails as that event, after the ones before it, as each alone would have)."""

    error: Exception


# --- bookkeeping ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResetWriteIds:
    """Table ``key`` (``visibility.table_key``) has no committed ACID write ids (new, or renamed away)."""

    key: str


@dataclass(frozen=True)
class CopyWriteIds:
    """Readers find table ``old``'s write ids under ``new`` (before a renamed table appears)."""

    old: str
    new: str


@dataclass(frozen=True)
class RememberTable:
    """The batch knows ``table`` as the target now has it (the next step of it reads nothing)."""

    table: TableSnapshot


@dataclass(frozen=True)
class ForgetTable:
    """The batch no longer knows target table ``db.name`` (the next step reads it again)."""

    db: str
    name: str


@dataclass(frozen=True)
class ForgetByState:
    """Target table ``db.name`` is no longer known to be replicated by state (dropped, renamed away)."""

    db: str
    name: str


@dataclass(frozen=True)
class NoteByState:
    """Target table ``db.name`` is replicated by state, for ``reason``."""

    db: str
    name: str
    reason: str


@dataclass(frozen=True)
class DatabaseCreated:
    """Target database ``name`` exists (again): its metric series may be set."""

    name: str


@dataclass(frozen=True)
class DatabaseDropped:
    """Target database ``name`` is gone: its tables replicated by state and its series go with it."""

    name: str


@dataclass(frozen=True)
class OpenTxns:
    """The source's transactions ``txn_ids`` are open (their writes wait for their commit)."""

    txn_ids: Sequence[int]


@dataclass(frozen=True)
class NoteTxnBytes:
    """Transaction ``txn_id`` wrote ``size`` bytes (counted should it abort)."""

    txn_id: int
    size: int


@dataclass(frozen=True)
class CommitTxn:
    """The one step that makes transaction ``txn_id`` visible across all its tables: its write ids
    (``visible``: table key -> write ids) added to the source's visibility file in one replace."""

    txn_id: int
    visible: Mapping[str, Sequence[int]]


@dataclass(frozen=True)
class AbortTxn:
    """Transaction ``txn_id`` aborted: nothing of it becomes visible (``pending_bytes`` it wrote are
    counted as never copied)."""

    txn_id: int
    pending_bytes: int = 0


Bookkeeping = (
    ResetWriteIds | CopyWriteIds | RememberTable | ForgetTable | ForgetByState | NoteByState | DatabaseCreated
    | DatabaseDropped | OpenTxns | NoteTxnBytes | CommitTxn | AbortTxn
)

# --- progress: what the batch's mode adds around a step's effects (step_effects.around) --------------
ObjectKey = tuple[str, str]  # (source db, table), lower case
ANY_OBJECT: ObjectKey = ("*", "*")  # a step whose objects are not known one by one


@dataclass(frozen=True)
class FenceDatabase:
    """A step out of event-id order (``--coalesce-backlog``), or one of a database found fenced: source
    database ``src`` stays fenced until the batch's end; ``opening`` marks its target database
    (``FENCE_PARAM``, at ``event_id``) now if it is not marked yet (``db``: as the step found it)."""

    src: str
    db: DatabaseSnapshot
    event_id: int
    opening: bool


@dataclass(frozen=True)
class SyncJournal:
    """Before a step of a batch that defers its markers: the progress journal reaches the disk first
    when the step changes one of ``objects`` an unsynced step changed (``journal.ProgressJournal``)."""

    objects: frozenset[ObjectKey]


@dataclass(frozen=True)
class ForgetDatabase:
    """The step changed target database ``name``: the batch reads it again."""

    name: str


@dataclass(frozen=True)
class ForgetTables:
    """The step may have changed any table: the batch reads each again."""


@dataclass(frozen=True)
class Advance:
    """Source database ``src`` is applied through ``last``: its ``repl.last.id`` now, or, in a batch
    that defers its markers (``deferred``), a journal line (unless ``journaled`` is False: a fenced
    database's steps are out of order, a crash re-applies its batch) and the marker owed at the batch's
    end. ``progressed``: the applier's progress moves now (a fenced database's moves at the batch's end).
    ``db``: the target database as the step found it, when the step left it unchanged (spares a read)."""

    src: str
    last: int
    deferred: bool = False
    journaled: bool = True
    progressed: bool = True
    db: DatabaseSnapshot | None = None


Progress = FenceDatabase | SyncJournal | ForgetDatabase | ForgetTables | Advance

Effect = CatalogEffect | PutPartitions | FileEffect | Bookkeeping | Refuse | Progress
