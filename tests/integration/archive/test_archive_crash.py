"""``streamer archive run`` killed (SIGKILL) while it archives, then run again: every record of the
topic is in exactly one archive file, the manifest chains, every file verifies and none is left that
the manifest does not name. Its lag is on its /metrics page while it runs."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from streamer.archive.archiver import Archiver, ArchiveSettings
from streamer.archive.manifest import FILE_PATTERN, MANIFEST_NAME, from_json
from streamer.archive.reading import pending, verified_records
from streamer.archive.store import ArchiveStore
from streamer.embedded_metastore.server import free_port
from streamer.events.codec import EventDeserializer
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.client_log import with_client_log
from streamer.kafka.topics import read_range, watermarks
from tests.integration.target.helpers import STREAMER, Source, mixed_workload

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def source(broker: EmbeddedBroker, topic: str, tmp_path: Path) -> Iterator[Source]:
    prefix = f"x{uuid.uuid4().hex[:6]}"
    src = Source.open(tmp_path / "source", broker.client_settings(), topic, f"src-{prefix}")
    src.prefix = prefix  # type: ignore[attr-defined]
    try:
        yield src
    finally:
        src.close()


def _argv(broker: EmbeddedBroker, source: Source, archive: Path, *extra: str) -> list[str]:
    return [STREAMER, "archive", "run", "--bootstrap-servers", broker.bootstrap_servers, "--topic",
            source.topic, "--source-id", source.source_id, "--dir", str(archive), "--max-records-per-file",
            "2", *extra]


def _files(archive: Path) -> int:
    try:
        return len(from_json((archive / MANIFEST_NAME).read_bytes()).files)
    except FileNotFoundError:
        return 0


def test_a_killed_archiver_archives_every_record_exactly_once(
    broker: EmbeddedBroker, source: Source, tmp_path: Path
) -> None:
    mixed_workload(source.warehouse, f"{source.prefix}_", 40, seed=5)  # type: ignore[attr-defined]
    source.publish()
    archive, port = tmp_path / "archive", free_port()
    log = (tmp_path / "archiver.log").open("w")
    child = subprocess.Popen(
        _argv(broker, source, archive, "--roll-seconds", "0", "--poll-seconds", "0.05", "--metrics-port",
              str(port)), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while _files(archive) < 4:
            alive = child.poll() is None and time.monotonic() < deadline
            assert alive, (tmp_path / "archiver.log").read_text()
            time.sleep(0.02)
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        assert "streamer_archive_lag_records " in page and "streamer_archive_files_total " in page
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(30)
        log.close()
    assert child.returncode == -signal.SIGKILL
    killed_at = _files(archive)

    done = subprocess.run(_argv(broker, source, archive, "--once", "--metrics-port", "0"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = from_json((archive / MANIFEST_NAME).read_bytes())
    assert len(manifest.files) >= killed_at
    verified = subprocess.run([STREAMER, "archive", "verify", "--dir", str(archive)], capture_output=True,
                              text=True, timeout=120)
    assert verified.returncode == 0, verified.stderr[-3000:]
    assert sorted(p.name for p in archive.iterdir() if FILE_PATTERN.match(p.name)) == sorted(
        e.file for e in manifest.files)
    assert not [p.name for p in archive.iterdir() if p.name.startswith(".")]

    assert _archived(archive) == _on_topic(broker, source.topic)  # every record once, in order


def _on_topic(broker: EmbeddedBroker, topic: str) -> list[int]:
    consumer = Consumer(with_client_log({**broker.client_settings(), "group.id": "crash-test",
                                         "isolation.level": "read_committed"}))
    try:
        marks = watermarks(consumer, topic)
        assert marks is not None
        return [int(m.offset() or 0) for m in read_range(consumer, topic, 0, 0, marks[1])]
    finally:
        consumer.close()


def _archived(archive: Path) -> list[int]:
    manifest = from_json((archive / MANIFEST_NAME).read_bytes())
    store, decode = ArchiveStore(str(archive)), EventDeserializer(check_envelope=False)
    return [r.offset for before, entry, _ in pending(manifest, None)
            for r in verified_records(store, manifest, before, entry, decode)]


def test_records_wait_for_a_full_file_until_the_roll_and_are_read_once(
    broker: EmbeddedBroker, source: Source, tmp_path: Path
) -> None:
    mixed_workload(source.warehouse, f"{source.prefix}_", 12, seed=9)  # type: ignore[attr-defined]
    source.publish()
    archive, on_topic = tmp_path / "archive", _on_topic(broker, source.topic)
    size = next(n for n in (4, 3, 5, 7) if len(on_topic) % n and len(on_topic) > n)  # some must wait
    archiver = Archiver(ArchiveSettings(broker.bootstrap_servers, source.topic, source.source_id,
                                        str(archive), max_records_per_file=size, roll_seconds=3600))
    consumer = archiver._consumer()
    try:
        while archiver.cycle(consumer, final=False):  # full files only: the rest waits for the roll
            pass
        full = archiver.manifest
        assert full.files and all(e.records == size for e in full.files)
        assert archiver.cycle(consumer, final=False) is False  # nothing new, not due: no file
        assert 0 < len(on_topic) - full.records < size
        assert archiver.cycle(consumer, final=True) is True  # due: what waited, read once
    finally:
        consumer.close()
    assert archiver.manifest.files[: len(full.files)] == full.files
    assert _archived(archive) == on_topic
