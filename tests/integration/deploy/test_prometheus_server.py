"""A real Prometheus server scrapes a real streamer /metrics endpoint; the lag series is queried
through Prometheus' HTTP API, as Grafana and the alert rules read it."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.deploy.helpers import DEPLOY

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PROMETHEUS = shutil.which("prometheus")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# what earlier tests in this process left in the lag histogram (count, count <= 0.5 s)
_LAG_BEFORE: dict[str, float] = {}


@pytest.fixture(scope="module")
def metrics_port() -> int:
    """streamer's own /metrics server, in this process, with lag values set."""
    from streamer import metrics

    for key, labels in (("count", None), ("le_0.5", {"le": "0.5"})):
        name = "streamer_target_lag_seconds_count" if labels is None else "streamer_target_lag_seconds_bucket"
        _LAG_BEFORE[key] = metrics.REGISTRY.get_sample_value(name, labels) or 0.0
    port = _free_port()
    metrics.serve(port, role=metrics.Role.TARGET)
    metrics.TARGET_LAST_APPLIED.labels(db="sales").set(1234)
    metrics.TARGET_LAST_APPLIED.labels(db="hr").set(1200)
    metrics.TARGET_LAG_EVENTS.set(7)
    for seconds in (0.2, 0.4, 3.0):
        metrics.TARGET_LAG_SECONDS.observe(seconds)
    return port


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory, metrics_port: int) -> Iterator[str]:
    if PROMETHEUS is None:
        pytest.skip("prometheus not installed (Debian/Ubuntu: apt-get install prometheus)")
    work = tmp_path_factory.mktemp("prometheus")
    shutil.copy(DEPLOY / "prometheus" / "alerts.yml", work / "alerts.yml")
    (work / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [alerts.yml]\n"
        "scrape_configs:\n"
        "  - job_name: streamer-target\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{metrics_port}'], labels: {{target: dr}}}}]\n"
    )
    port = _free_port()
    log = (work / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: urllib.request.urlopen(f"{url}/-/ready", timeout=1).status == 200, proc, work)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _wait(ready: Any, proc: subprocess.Popen[bytes], work: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, (work / "prometheus.log").read_text()
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"prometheus not ready in {timeout} s:\n{(work / 'prometheus.log').read_text()}")


def _query(url: str, expr: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}") as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return body["data"]["result"]


def _eventually(url: str, expr: str, timeout: float = 20) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := _query(url, expr):
            return result
        time.sleep(0.5)
    raise AssertionError(f"no result for {expr} in {timeout} s")


def test_prometheus_scrapes_the_lag_series(prometheus: str) -> None:
    # only the series this test set: earlier tests in this process leave databases of their own
    applied = _eventually(prometheus, 'streamer_target_last_applied_event_id{db=~"sales|hr"}')
    by_db = {r["metric"]["db"]: float(r["value"][1]) for r in applied}
    assert by_db == {"sales": 1234.0, "hr": 1200.0}
    assert {r["metric"]["job"] for r in applied} == {"streamer-target"}
    assert {r["metric"]["target"] for r in applied} == {"dr"}
    count = _eventually(prometheus, "streamer_target_lag_seconds_count")
    assert float(count[0]["value"][1]) == _LAG_BEFORE["count"] + 3
    buckets = _eventually(prometheus, 'streamer_target_lag_seconds_bucket{le="0.5"}')
    assert float(buckets[0]["value"][1]) == _LAG_BEFORE["le_0.5"] + 2
    assert float(_eventually(prometheus, "streamer_target_lag_events")[0]["value"][1]) == 7


def test_lag_moves_and_the_recording_rule_sees_it(prometheus: str) -> None:
    from streamer import metrics

    for _ in range(20):
        metrics.TARGET_LAG_SECONDS.observe(50.0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        mean = _query(prometheus, "streamer:target_lag_seconds:mean5m")
        if mean and float(mean[0]["value"][1]) > 1:
            break
        time.sleep(0.5)
    else:
        raise AssertionError("the recording rule never saw the new lag")
    assert mean[0]["metric"]["target"] == "dr"
    up = _query(prometheus, 'up{job="streamer-target"}')
    assert float(up[0]["value"][1]) == 1
