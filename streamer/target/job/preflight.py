"""What ``streamer target run`` checks before it starts Spark, and what it says while it waits.

Each wrong setting is one line at start, before the state dir is touched or a JVM started: a live
job already on the state dir, a state dir of another target (``streamer.target.state.binding``), a
metastore that does not answer, a checkpoint of another topic, a topic whose records come from
another source. What may be right but looks wrong (no record yet, a ``--until-event`` beyond the
source head) is a warning at start and a reminder while the job waits (``Waiting``), never silence.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamer.errors import CodecError, ConfigError, StreamerError
from streamer.kafka.naming import default_topic
from streamer.target.dr.failover import LOCK_FILE, JobLock, JobRunningError, refuse_if_failed_over
from streamer.target.state.binding import Given, bind, check_state_dir

if TYPE_CHECKING:
    from streamer.metastore.catalog import Catalog
    from streamer.target.job.settings import TargetSettings

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 10.0  # the start-up metastore check; the job's own connection keeps its 60 s
FIRST_REMINDER_S = 60.0
REMINDER_EVERY_S = 300.0


# --- pure: the words ------------------------------------------------------------------------------


def other_source_message(source_id: str, topic: str, found: str, event_id: int) -> str:
    """A topic whose records are another source's: agents never mix sources in one topic."""
    return (f"--source-id {source_id}: topic {topic} holds the records of source {found!r} (its last "
            f"record is event {event_id}); give --source-id {found}, or the topic of source {source_id!r} "
            f"(--topic; default {default_topic(source_id)})")


def beyond_head_message(until: int, head: int, topic: str) -> str:
    return (f"--until-event {until} is beyond the source head (event {head}, topic {topic}): the job "
            f"applies up to {head} and waits for the source to reach {until}")


def nothing_yet_message(
    topic: str, source_id: str, exists: bool, topics: list[str], until: int | None
) -> str:
    """No record to read yet: the agent may start later, or ``--source-id``/``--topic`` is wrong.
    ``topics``: the broker's, to name the sources (or topics) there are."""
    what = f"topic {topic} holds no record yet" if exists else f"topic {topic} does not exist yet"
    sources = sources_of(topics)
    others = [t for t in topics if t != topic and not t.startswith("_")]
    if sources:
        seen = f"the broker has topics of source(s) {_few(sources)}"
    else:
        seen = f"no {default_topic('<id>')} topic on the broker; its topics: {_few(others) or 'none'}"
    bound = f"; --until-event {until} is beyond it" if until is not None else ""
    return (f"{what} (source {source_id!r}; {seen}){bound}: the job waits for records; check --source-id "
            "and --topic if no agent publishes there")


def _few(names: list[str], most: int = 10) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def sources_of(topics: list[str]) -> list[str]:
    """The source ids the default-named topics (``streamer.<id>.events``) belong to."""
    prefix, suffix = default_topic("\0").split("\0")
    return sorted(t[len(prefix):-len(suffix)] for t in topics
                  if t.startswith(prefix) and t.endswith(suffix) and len(t) > len(prefix) + len(suffix))


class Waiting:
    """The job's reminders while it waits (pure; ``now`` is ``time.monotonic()``): nothing ever read
    from the topic, or a ``--until-event`` not reached, first after ``first`` seconds, then every
    ``every``. A job that consumed before (a restart of a quiet stream) is not told off."""

    def __init__(self, topic: str, source_id: str, until: int | None, started: float,
                 first: float = FIRST_REMINDER_S, every: float = REMINDER_EVERY_S) -> None:
        self.topic, self.source_id, self.until = topic, source_id, until
        self.started, self.every = started, every
        self.next_at = started + first

    def note(self, now: float, read_before: bool, consumed: int) -> tuple[int, str] | None:
        """The reminder due at ``now`` and its log level (None: none due). ``read_before``: the job
        consumed a record (in this run, or before it: its event chain); ``consumed``: the newest
        event id consumed."""
        if now < self.next_at:
            return None
        while self.next_at <= now:
            self.next_at += self.every
        waited = f"{now - self.started:.0f} s"
        if not read_before:
            bound = f"; --until-event {self.until} not reached" if self.until is not None else ""
            return logging.WARNING, (
                f"no record read from topic {self.topic} in {waited} (source {self.source_id!r}){bound}: "
                "is an agent publishing there? (check --source-id and --topic)")
        if self.until is not None and consumed < self.until:
            return logging.INFO, (f"waiting for the source to reach --until-event {self.until}: consumed "
                                  f"through event {consumed} ({waited} since start)")
        return None


# --- the checks (I/O) -----------------------------------------------------------------------------


def refuse_live_job(state_dir: str | Path) -> None:
    """``JobRunningError`` at once when a live job (or a failover) holds the state dir's job lock."""
    path = Path(state_dir)
    if not (path / LOCK_FILE).exists():
        return
    lock = JobLock(path)
    if lock.acquire(0.0):
        lock.release()
        return
    try:
        pid = (path / LOCK_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        pid = ""
    who = f"pid {pid}" if pid.isdigit() else "another process"
    raise JobRunningError(f"--state-dir {state_dir}: a target job ({who}) is running on it; two jobs must "
                          "not share a state dir: stop that one first, or give this target's own --state-dir")


def probe_metastore(settings: TargetSettings, timeout_s: float = PROBE_TIMEOUT_S) -> Catalog:
    """An open catalog on the target metastore, asked once within ``timeout_s``; a wrong address is
    one line here, before the state dir is touched or Spark started."""
    from streamer.metastore.thrift import HmsCatalog

    try:
        catalog = HmsCatalog(settings.metastore.uri, timeout_s=timeout_s, auth=settings.metastore.auth)
    except StreamerError as exc:
        raise StreamerError(f"--hms-uri {settings.metastore.uri}: {exc}; check the address and that the "
                            "metastore runs") from exc
    try:
        catalog.list_databases()
    except StreamerError as exc:
        catalog.close()
        raise StreamerError(f"--hms-uri {settings.metastore.uri}: no metastore answers there ({exc}); check "
                            "the address") from exc
    return catalog


def check_checkpoint(settings: TargetSettings) -> None:
    """``ConfigError`` when the checkpoint resumes from an offset of another topic (Spark would fail
    the query after its start with a stack of Java lines)."""
    from streamer.target.job.checkpoint import resume_offset

    offset = resume_offset(settings.layout.checkpoint_dir)
    other = None if offset is None else offset.get("topic")
    if other is not None and other != settings.kafka.topic:
        raise ConfigError(
            f"--topic {settings.kafka.topic}: the checkpoint {settings.layout.checkpoint_dir} holds offsets "
            f"of topic {other}: it is another target's; give this target's own --state-dir (and "
            f"--checkpoint-dir), or --topic {other}"
        )


def check_topic(settings: TargetSettings, config: Mapping[str, Any]) -> None:
    """Refuse a topic of another source; warn when it has no record yet or ends before the bound."""
    from streamer.events.codec import EventDeserializer
    from streamer.events.model import ProgressPayload
    from streamer.kafka.topics import read_tail

    tail = read_tail(config, settings.kafka.topic, n=1)
    if not tail or tail[0].value is None:
        topics = _topics(config)
        kafka = settings.kafka
        log.warning("%s", nothing_yet_message(kafka.topic, settings.source_id, kafka.topic in topics, topics,
                                              kafka.until_event))
        return
    try:
        event = EventDeserializer(check_envelope=False)(tail[0].value)
    except CodecError as exc:  # the job's own decoding names it, at its offset
        log.warning("topic %s: its last record (offset %d) is not a streamer event: %s", settings.kafka.topic,
                    tail[0].offset, exc)
        return
    if event.source.source_id != settings.source_id:
        raise ConfigError(other_source_message(settings.source_id, settings.kafka.topic,
                                               event.source.source_id, event.event_id))
    head = event.event_id
    if isinstance(event.payload, ProgressPayload):
        head = max(head, event.payload.source_head_event_id)
    if settings.kafka.until_event is not None and settings.kafka.until_event > head:
        log.warning("%s", beyond_head_message(settings.kafka.until_event, head, settings.kafka.topic))


def _topics(config: Mapping[str, Any]) -> list[str]:
    from confluent_kafka.admin import AdminClient

    from streamer.kafka.client_log import with_client_log

    try:
        return sorted(AdminClient(with_client_log(dict(config))).list_topics(timeout=10).topics)
    except Exception as exc:  # naming the broker's topics is a courtesy of the warning
        log.debug("could not list the broker's topics: %s", exc)
        return []


def preflight(settings: TargetSettings) -> None:
    """Every start-up check of ``target run``, cheapest first; raises on the first wrong setting."""
    from streamer.kafka.reachability import check_reachable

    refuse_live_job(settings.layout.state_dir)
    if Path(settings.layout.state_dir).is_dir():
        # names: no I/O
        check_state_dir(settings.layout.state_dir, Given(settings.source_id, settings.kafka.topic))
    config = {"bootstrap.servers": settings.kafka.bootstrap_servers, **settings.kafka.config}
    check_reachable(config)  # one line
    catalog = probe_metastore(settings)
    try:
        if Path(settings.layout.state_dir).is_dir():
            lent = contextlib.nullcontext(catalog)
            check_state_dir(settings.layout.state_dir, Given(hms_uri=settings.metastore.uri), lambda: lent)
    finally:
        catalog.close()
    check_checkpoint(settings)
    check_topic(settings, config)


@contextlib.contextmanager
def claim(settings: TargetSettings, catalog: Catalog) -> Iterator[None]:
    """Hold the state dir for a job: refuse a failed-over target, take the job lock (refusing a
    second job), check the checkpoint's topic and bind the state dir to this target
    (``streamer.target.state.binding.bind``, ``catalog`` being the job's metastore)."""
    Path(settings.layout.state_dir).mkdir(parents=True, exist_ok=True)
    refuse_if_failed_over(settings.layout.state_dir)
    with JobLock(settings.layout.state_dir).held(what=" (two target jobs must not share a state dir)"):
        check_checkpoint(settings)
        bind(settings.layout.state_dir, settings.source_id, settings.kafka.topic, settings.metastore.uri,
             catalog)
        yield

