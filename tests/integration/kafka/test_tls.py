"""The broker connection over TLS, with hostname verification, against the real embedded broker.

A throwaway CA signs the broker's certificate; the broker (Tansu behind its TLS front) is reached
with the project's own clients: the source agent, the topic readers and the Spark source. Each
refusal is paired with a control that differs in one setting only and connects, so a test fails if
the refusal had another cause.
"""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from streamer.events.codec import decode_event
from streamer.events.model import EventType
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.settings import client_config, with_overrides
from streamer.kafka.tls_front import TlsFiles
from streamer.kafka.topics import end_offsets, ensure_topic, iter_range
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.enrich import EnrichSettings
from streamer.source.reader import SqlNotificationReader
from streamer.warehouse import Warehouse
from streamer.warehouse.workload import Workload
from tests.fixtures.certs import Ca, Issued, make_ca

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

FRONT_LOG = "streamer.kafka.tls_front"


@dataclass(frozen=True)
class Pki:
    ca: Ca
    server: Issued  # for localhost and 127.0.0.1, signed by `ca`
    other_host: Issued  # for kafka.other.example, signed by `ca`
    rogue: Ca  # a CA nobody trusts
    client_ca: Ca
    client: Issued  # signed by `client_ca`
    rogue_client: Issued  # a client certificate signed by `rogue`


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca, rogue, client_ca = make_ca(d, "streamer-test-ca"), make_ca(d, "rogue-ca"), make_ca(d, "client-ca")
    return Pki(
        ca=ca,
        server=ca.issue(d, "broker", ["localhost", "127.0.0.1"]),
        other_host=ca.issue(d, "other", ["kafka.other.example"]),
        rogue=rogue,
        client_ca=client_ca,
        client=client_ca.issue(d, "agent", ["streamer-agent"], client=True),
        rogue_client=rogue.issue(d, "intruder", ["streamer-agent"], client=True),
    )


def _broker(pki: Pki, cert: Issued, log_dir: Path, client_ca: Path | None = None) -> EmbeddedBroker:
    # Advertised as "localhost": clients verify the certificate against a DNS name.
    tls = TlsFiles.of(cert.cert, cert.key, client_ca=client_ca, ca=pki.ca.cert)
    return EmbeddedBroker(tls=tls, advertised_host="localhost", log_path=log_dir / "tansu.log")


@pytest.fixture(scope="module")
def tls_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with _broker(pki, pki.server, tmp_path_factory.mktemp("tls-broker")) as running:
        yield running


def _tls(broker: EmbeddedBroker, ca: Path) -> dict[str, Any]:
    """Client settings as an operator writes them (`-X` pairs), validated like the CLI does."""
    return client_config(
        broker.bootstrap_servers,
        {
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca),
            "ssl.endpoint.identification.algorithm": "https",
        },
    )


def _connects(config: dict[str, Any], timeout: float = 8.0) -> bool:
    """True if the client gets metadata naming the broker; False once it reports a failure."""
    producer = Producer({**config, "socket.connection.setup.timeout.ms": 3000})
    try:
        return bool(producer.list_topics(timeout=timeout).brokers)
    except KafkaException:
        return False


def _ssl_error(config: dict[str, Any], timeout: float = 8.0) -> str:
    """The first SSL error the client reports ('' if none within `timeout`)."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        producer.poll(0.2)
        for error in errors:
            if error.code() == KafkaError._SSL:
                return str(error)
    return ""


def _front_refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == FRONT_LOG and "refused" in r.getMessage()]


def _front_refused(caplog: pytest.LogCaptureFixture, reason: str, timeout: float = 5.0) -> bool:
    """True once the front logs a refusal for `reason` (it lands a moment after the client's error)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(reason in message for message in _front_refusals(caplog)):
            return True
        time.sleep(0.05)
    return False


def test_tansu_listens_on_loopback_only_and_the_public_port_speaks_tls_only(
    tls_broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    assert tls_broker.broker_host == "127.0.0.1" and tls_broker.broker_port != tls_broker.port
    caplog.set_level(logging.WARNING, FRONT_LOG)
    plaintext = client_config(tls_broker.bootstrap_servers)
    assert not _connects(plaintext, timeout=3)
    assert _front_refused(caplog, "WRONG_VERSION_NUMBER")


def test_source_agent_publishes_and_consumer_reads_over_tls(
    tls_broker: EmbeddedBroker, pki: Pki, sqlite_warehouse: Warehouse, tmp_path: Path
) -> None:
    config = _tls(tls_broker, pki.ca.cert)
    topic = "tls-agent"
    ensure_topic(config, topic)
    stats = Workload(sqlite_warehouse, seed=11).run(60)
    agent_config = AgentConfig(
        "tls-src", config, topic=topic, gap_settle_seconds=0.2,
        enrich=EnrichSettings(cmroot=str(tmp_path / "cmroot")), batch_size=25,
    )
    reader = SqlNotificationReader(sqlite_warehouse.store.url)
    agent = SourceAgent(agent_config, reader)
    try:
        agent.run(once=True)
        assert agent.last_id == stats.last_event_id
    finally:
        agent.close()
        reader.close()

    high = end_offsets(config, topic)[0]
    consumer = Consumer(with_overrides(config, group_id="unused", isolation_level="read_committed",
                                       enable_auto_commit=False, auto_offset_reset="earliest"))
    try:
        events = [decode_event(m.value()) for m in iter_range(consumer, topic, 0, 0, high, idle_timeout=20)]
    finally:
        consumer.close()
    data = [e.event_id for e in events if e.event_type is not EventType.PROGRESS]
    assert data == list(range(1, stats.last_event_id + 1))


def test_certificate_for_another_hostname_is_refused(
    pki: Pki, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, FRONT_LOG)
    with _broker(pki, pki.other_host, tmp_path) as broker:
        config = _tls(broker, pki.ca.cert)
        error = _ssl_error(config)
        assert "certificate verify failed" in error
        assert not _connects(config, timeout=3)
        # The chain is trusted: with only the hostname check off, the same client connects.
        assert _connects(with_overrides(config, ssl_endpoint_identification_algorithm="none"))
    assert _front_refused(caplog, "BAD_CERTIFICATE")


def test_untrusted_ca_is_refused(
    tls_broker: EmbeddedBroker, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, FRONT_LOG)
    assert "certificate verify failed" in _ssl_error(_tls(tls_broker, pki.rogue.cert))
    assert _front_refused(caplog, "UNKNOWN_CA")
    assert _connects(_tls(tls_broker, pki.ca.cert))


def test_mutual_tls_requires_a_client_certificate_from_the_client_ca(
    pki: Pki, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, FRONT_LOG)
    with _broker(pki, pki.server, tmp_path, client_ca=pki.client_ca.cert) as broker:
        config = _tls(broker, pki.ca.cert)
        assert not _connects(config, timeout=4)
        assert _front_refused(caplog, "PEER_DID_NOT_RETURN_A_CERTIFICATE")
        caplog.clear()

        intruder = with_overrides(config, ssl_certificate_location=str(pki.rogue_client.cert),
                                  ssl_key_location=str(pki.rogue_client.key))
        assert not _connects(intruder, timeout=4)
        assert _front_refused(caplog, "CERTIFICATE_VERIFY_FAILED")

        agent = with_overrides(config, ssl_certificate_location=str(pki.client.cert),
                               ssl_key_location=str(pki.client.key))
        ensure_topic(agent, "mtls")
        producer = Producer(with_overrides(agent, enable_idempotence=True))
        producer.produce("mtls", b"hello")
        assert producer.flush(20) == 0
        assert end_offsets(agent, "mtls") == {0: 1}


def test_broker_run_command_serves_tls(pki: Pki, tmp_path: Path) -> None:
    entry = "from streamer.cli import main; main()"
    args = ["broker", "run", "--log-file", str(tmp_path / "tansu.log"), "--advertised-host", "localhost",
            "--tls-cert", str(pki.server.cert), "--tls-key", str(pki.server.key)]
    proc = subprocess.Popen([sys.executable, "-c", entry, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("bootstrap servers: localhost:"), line
        bootstrap = line.split(": ", 1)[1].strip()
        config = client_config(bootstrap, {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca.cert)})
        ensure_topic(config, "cli-tls")
        assert end_offsets(config, "cli-tls") == {0: 0}
        assert not _connects(client_config(bootstrap), timeout=3)  # no plaintext on the public port
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_tls_front_survives_broker_restart(tls_broker: EmbeddedBroker, pki: Pki) -> None:
    """A restart keeps the port and the TLS front; clients reconnect over TLS (topics are gone)."""
    port = tls_broker.port
    config = _tls(tls_broker, pki.ca.cert)
    ensure_topic(config, "before-restart")
    tls_broker.restart()
    assert tls_broker.port == port
    assert end_offsets(config, "before-restart") == {}
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    assert _connects(config)


def test_spark_source_reads_over_tls(
    tls_broker: EmbeddedBroker, pki: Pki, spark: Any, tmp_path: Path
) -> None:
    config = _tls(tls_broker, pki.ca.cert)
    topic = "tls-spark"
    ensure_topic(config, topic)
    producer = Producer(with_overrides(config, enable_idempotence=True, transactional_id="tls-spark"))
    producer.init_transactions(10)
    producer.begin_transaction()
    values = [f"v{i}".encode() for i in range(5)]
    for value in values:
        producer.produce(topic, value)
    producer.commit_transaction(10)

    rows: list[bytes] = []

    def collect(df: Any, batch_id: int) -> None:
        rows.extend(bytes(row.value) for row in df.orderBy("offset").collect())

    reader = (
        spark.readStream.format("streamer_kafka")
        .option("bootstrap.servers", tls_broker.bootstrap_servers)
        .option("topic", topic)
        .option("kafka.security.protocol", "SSL")
        .option("kafka.ssl.ca.location", str(pki.ca.cert))
        .option("kafka.ssl.endpoint.identification.algorithm", "https")
    )
    query = (
        reader.load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    assert query.exception() is None
    assert rows == values
