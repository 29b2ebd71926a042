"""Which target a state dir belongs to: its source id, topic and metastore, recorded in
``<state-dir>/target.json`` by the first ``streamer target run`` and compared by every later command.

A state dir holds one target's halts, progress, event chain and (by default) Spark checkpoint. Given
to another target's job it would resume from the wrong offset of the wrong topic (applying nothing,
or skipping events); given to ``status`` or ``retry`` it shows and clears the wrong halts. So a
source id or topic other than the recorded one is refused in one line naming both (``ConfigError``,
exit 2). A metastore is compared by address (``thrift://host:port``, any of a comma-separated list);
one address can have several spellings (a service name in the cluster, a DNS name on a bastion), so
an address other than the recorded one is taken as the same metastore only when that metastore
holds this state dir's databases as replicas of its source at or past the progress recorded here.

A state dir written by a release before the binding (state, no ``target.json``) is adopted by its
next ``target run`` once nothing in it contradicts the run (the topic of its event chain and
checkpoint, the metastore's databases); operator commands read it as before. The pure part
(addresses, comparisons, the evidence) is free of I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from streamer.errors import ConfigError
from streamer.target.state.files import expect_object, expect_str, field, read_json, write_json
from streamer.target.state.lock import state_lock

log = logging.getLogger(__name__)

BINDING_FILE = "target.json"
DEFAULT_HMS_PORT = 9083
# files only a target's job or its commands write: a directory with none of them holds no target's state
STATE_FILES = ("target.json", "target-state.json", "progress.json", "job-mode.json", "chain.json",
               "failover.json", "failback.json", "bootstrap-progress.json")
EVIDENCE_DATABASES = 20  # recorded databases looked up to tell whether a metastore is this target's


@dataclass(frozen=True)
class Binding:
    """The target a state dir belongs to."""

    source_id: str
    topic: str
    hms_uri: str  # as the last job given it
    since: str = ""  # when the first job (or the adopting one) recorded it, ISO-8601 UTC

    def describe(self) -> str:
        return f"source {self.source_id!r}, topic {self.topic}, metastore {self.hms_uri}"

    def to_json(self) -> dict[str, Any]:
        return {"source_id": self.source_id, "topic": self.topic, "hms_uri": self.hms_uri,
                "since": self.since}


@dataclass(frozen=True)
class Given:
    """What a command was given; None: the command takes no such option (or it was not given)."""

    source_id: str | None = None
    topic: str | None = None
    hms_uri: str | None = None


# --- pure ---------------------------------------------------------------------------------------


def endpoints(uri: str) -> frozenset[tuple[str, int]]:
    """The (host, port) pairs of a metastore URI or comma-separated list of them, spelled one way:
    host in lower case without a trailing dot, the port 9083 when none is given."""
    out: set[tuple[str, int]] = set()
    for part in uri.split(","):
        part = part.strip()
        if not part:
            continue
        parsed = urlsplit(part if "://" in part else f"thrift://{part}")
        try:
            port = parsed.port or DEFAULT_HMS_PORT
        except ValueError:
            port = DEFAULT_HMS_PORT
        out.add(((parsed.hostname or "").rstrip(".").lower(), port))
    return frozenset(out)


def same_address(a: str, b: str) -> bool:
    """Whether two metastore URIs name a common endpoint (an HA list shares one with each member)."""
    return bool(endpoints(a) & endpoints(b))


def name_mismatch(binding: Binding, given: Given, state_dir: str | Path) -> str | None:
    """The one line refusing a source id or topic other than the recorded ones; None if they match."""
    for flag, value, bound in (("--source-id", given.source_id, binding.source_id),
                               ("--topic", given.topic, binding.topic)):
        if value is not None and value != bound:
            return (f"{flag} {value}: --state-dir {state_dir} belongs to another target "
                    f"({binding.describe()}); give this target's own --state-dir, or {flag} {bound}")
    return None


@dataclass(frozen=True)
class Evidence:
    """Whether a metastore holds a state dir's databases: ``same`` True (it does), False (it
    contradicts the state dir) or None (nothing to tell by); ``detail`` says what was found."""

    same: bool | None
    detail: str


def metastore_evidence(
    recorded: Mapping[str, int], found: Mapping[str, tuple[str | None, int] | None], source_id: str
) -> Evidence:
    """Compare the progress a state dir recorded (target database -> last applied event id) with what
    a metastore holds (database -> (its ``streamer.source.id``, its ``repl.last.id``), None: absent).

    The metastore the job applied to holds each recorded database that still exists as a replica of
    ``source_id`` at or past the recorded event (the job records progress after applying it). One
    replica behind its record, or none of them found, means another metastore."""
    if not recorded:
        return Evidence(None, "this state dir records no progress yet")
    behind: list[str] = []
    held: list[str] = []
    elsewhere: list[str] = []
    for db, event_id in sorted(recorded.items()):
        entry = found.get(db)
        if entry is None:
            continue
        owner, last_id = entry
        if owner != source_id:
            elsewhere.append(f"{db} (replicated from {owner!r})" if owner else f"{db} (not a replica)")
        elif last_id < event_id:
            behind.append(f"{db} at event {last_id} there, {event_id} recorded here")
        else:
            held.append(db)
    if behind:
        return Evidence(False, "its replicas are behind this state dir's progress: " + ", ".join(behind))
    if held:
        return Evidence(True, "it holds this state dir's databases " + ", ".join(held))
    names = ", ".join(sorted(recorded)[:5]) + (", ..." if len(recorded) > 5 else "")
    seen = f" ({', '.join(elsewhere)})" if elsewhere else ""
    return Evidence(False, f"it holds none of this state dir's databases as replicas of source "
                           f"{source_id!r}: {names}{seen}")


def metastore_refusal(given_uri: str, binding: Binding, state_dir: str | Path, evidence: Evidence) -> str:
    """The one line refusing a metastore other than the one a state dir belongs to."""
    why = evidence.detail if evidence.same is False else f"{evidence.detail}, so nothing shows it is the same"
    return (f"--hms-uri {given_uri}: --state-dir {state_dir} belongs to another target "
            f"({binding.describe()}); {why}. Give this target's own --state-dir, or --hms-uri "
            f"{binding.hms_uri}")


# --- reading and writing ------------------------------------------------------------------------


def read_binding(state_dir: str | Path) -> Binding | None:
    """The recorded binding; None for a state dir without one (new, or of an earlier release)."""
    path = Path(state_dir) / BINDING_FILE
    raw = read_json(path)
    if raw is None:
        return None
    body = expect_object(raw, path, "the file")
    return Binding(
        source_id=expect_str(field(body, "source_id", path, "the file"), path, "source_id"),
        topic=expect_str(field(body, "topic", path, "the file"), path, "topic"),
        hms_uri=expect_str(field(body, "hms_uri", path, "the file"), path, "hms_uri"),
        since=expect_str(body.get("since", ""), path, "since"),
    )


def write_binding(state_dir: str | Path, binding: Binding) -> None:
    with state_lock(state_dir):
        write_json(Path(state_dir) / BINDING_FILE, binding.to_json())


def has_state(state_dir: str | Path) -> bool:
    """Whether a target's job or commands ever wrote state here (an empty or unrelated directory not)."""
    return any((Path(state_dir) / name).exists() for name in STATE_FILES)


def recorded_progress(state_dir: str | Path) -> dict[str, int]:
    """Target database -> last applied event id, as the job recorded (``progress.json``, its
    ``--db-map`` applied)."""
    from streamer.target.state.status import job_db_map, read_progress

    db_map = job_db_map(state_dir)
    by_source, _ = read_progress(state_dir)
    return {db_map.get(db.lower(), db.lower()): int(p.get("event_id", 0)) for db, p in by_source.items()}


def lookup(catalog: Any, names: list[str]) -> dict[str, tuple[str | None, int] | None]:
    """(``streamer.source.id``, ``repl.last.id``) of each of ``names`` in ``catalog`` (None: absent)."""
    from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM

    out: dict[str, tuple[str | None, int] | None] = {}
    for name in names:
        db = catalog.get_database(name)
        if db is None:
            out[name] = None
            continue
        raw = db.parameters.get(LAST_ID_PARAM, "0") or "0"
        out[name] = (db.parameters.get(REPL_SOURCE_PARAM), int(raw) if raw.strip().isdigit() else 0)
    return out


def evidence_of(state_dir: str | Path, catalog: Any, source_id: str) -> Evidence:
    """``metastore_evidence`` of ``catalog`` for this state dir (a bounded number of lookups)."""
    recorded = recorded_progress(state_dir)
    names = sorted(recorded, key=lambda db: (-recorded[db], db))[:EVIDENCE_DATABASES]
    picked = {db: recorded[db] for db in names}
    return metastore_evidence(picked, lookup(catalog, names), source_id)


def check_state_dir(
    state_dir: str | Path, given: Given, catalog: Callable[[], AbstractContextManager[Any]] | None = None
) -> Binding | None:
    """Refuse (``ConfigError``, one line) what a command was given when it contradicts the target the
    state dir belongs to; returns the binding (None: not bound yet, nothing to compare).

    ``catalog`` gives the given metastore as a context (``HmsCatalog(uri)`` opens and closes one,
    ``nullcontext(open_one)`` lends one); it is asked only when the address differs from the
    recorded one. Without it such an address is refused."""
    binding = read_binding(state_dir)
    if binding is None:
        return None
    refusal = name_mismatch(binding, given, state_dir)
    if refusal is not None:
        raise ConfigError(refusal)
    if given.hms_uri is None or same_address(given.hms_uri, binding.hms_uri):
        return binding
    evidence = Evidence(None, "the address differs")
    if catalog is not None:
        with catalog() as opened:
            evidence = evidence_of(state_dir, opened, binding.source_id)
    if evidence.same:
        log.debug("metastore %s is not the address %s recorded in %s, but %s: the same metastore",
                  given.hms_uri, binding.hms_uri, Path(state_dir) / BINDING_FILE, evidence.detail)
        return binding
    raise ConfigError(metastore_refusal(given.hms_uri, binding, state_dir, evidence))


def check_command(
    state_dir: str | Path, source_id: str | None, topic: str | None, hms_uri: str, auth: Any
) -> Binding | None:
    """``check_state_dir`` for an operator command given the target metastore ``hms_uri`` (opened
    with ``auth`` only to tell whether another address is the same metastore)."""
    from contextlib import closing

    from streamer.metastore.thrift import HmsCatalog

    return check_state_dir(state_dir, Given(source_id, topic, hms_uri),
                           lambda: closing(HmsCatalog(hms_uri, auth=auth)))


def adoption_refusal(
    state_dir: str | Path, given: Given, chain_topic: str | None, evidence: Evidence
) -> str | None:
    """Why a state dir of an earlier release (state, no binding) cannot be adopted by a job given
    ``given`` (its event chain was of another topic, or the metastore contradicts its progress)."""
    if chain_topic is not None and given.topic is not None and chain_topic != given.topic:
        return (f"--topic {given.topic}: --state-dir {state_dir} holds the event chain of topic "
                f"{chain_topic} (chain.json): it is another target's; give this target's own --state-dir, "
                f"or --topic {chain_topic}")
    if evidence.same is False and given.hms_uri is not None:
        return (f"--hms-uri {given.hms_uri}: --state-dir {state_dir} does not belong to this metastore "
                f"({evidence.detail}); give this target's own --state-dir")
    return None


def bind(state_dir: str | Path, source_id: str, topic: str, hms_uri: str, catalog: Any) -> Binding:
    """The job's side, under its job lock: check the state dir against the job's settings (as
    ``check_state_dir``, the job's own metastore ``catalog`` for the evidence), adopt one of an
    earlier release, and record the binding (a new address proven the same is recorded as the
    job's). ``ConfigError`` (one line) when the state dir is another target's."""
    from streamer.target.state.chain import read_anchor

    given = Given(source_id, topic, hms_uri)
    binding = check_state_dir(state_dir, given, lambda: nullcontext(catalog))
    now = datetime.now(UTC).isoformat(timespec="seconds")
    if binding is None:
        if has_state(state_dir):
            anchor = read_anchor(state_dir)
            refusal = adoption_refusal(state_dir, given, anchor.topic if anchor else None,
                                       evidence_of(state_dir, catalog, source_id))
            if refusal is not None:
                raise ConfigError(refusal)
            log.info("state dir %s (of an earlier release) adopted: bound to source %r, topic %s, "
                     "metastore %s (%s)", state_dir, source_id, topic, hms_uri, BINDING_FILE)
        binding = Binding(source_id, topic, hms_uri, now)
        write_binding(state_dir, binding)
    elif binding.hms_uri != hms_uri:
        if not same_address(binding.hms_uri, hms_uri):
            log.info("metastore %s holds this state dir's databases (it was %s): recorded as its address",
                     hms_uri, binding.hms_uri)
        binding = Binding(source_id, topic, hms_uri, binding.since)
        write_binding(state_dir, binding)
    return binding

