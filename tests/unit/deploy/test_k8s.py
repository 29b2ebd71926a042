"""deploy/k8s: the manifests parse, run real streamer commands with the ConfigMap's config file and
the Secret's environment, and agree on images, ports, probes, volumes and Prometheus annotations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from streamer.kafka.settings import parse_pairs, validate
from tests.unit.deploy.helpers import DEPLOY, REPO, Invocation, built_settings, parse_streamer

K8S = DEPLOY / "k8s"
DOCS: list[dict[str, Any]] = [
    doc for path in sorted(K8S.glob("*.yaml")) if path.name != "kustomization.yaml"
    for doc in yaml.safe_load_all(path.read_text()) if doc
]
EXTERNAL_CLAIMS = {"dr-warehouse"}  # the DR site's warehouse volume, shared with its metastore


def _objects(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in DOCS if d["kind"] == kind}


CONFIG = _objects("ConfigMap")["streamer-config"]["data"]
SECRETS = {name: s["stringData"] for name, s in _objects("Secret").items()}
WORKLOADS = {**_objects("Deployment"), **_objects("Job")}


def _pod(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]


def _container(workload: dict[str, Any]) -> dict[str, Any]:
    containers = _pod(workload)["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def _env(container: dict[str, Any]) -> dict[str, str]:
    out = {}
    for item in container.get("env", []):
        if "value" in item:
            out[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            out[item["name"]] = SECRETS[ref["name"]][ref["key"]]
    return out


def _streamer_argv(container: dict[str, Any], config_dir: Path) -> list[str]:
    """The container's streamer arguments, with the ConfigMap's files written to ``config_dir``."""
    if container.get("command") == ["spark-submit"]:
        args = container["args"]
        entry = next(i for i, a in enumerate(args) if a.endswith(".py"))
        argv = list(args[entry + 1 :])
    else:
        assert "command" not in container, "the image's entrypoint is streamer"
        argv = list(container["args"])
    mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "config")
    for i, arg in enumerate(argv):
        if arg.startswith(mount + "/"):
            key = arg[len(mount) + 1 :]
            assert key in CONFIG, f"{arg}: no key {key} in the ConfigMap"
            (config_dir / key).write_text(CONFIG[key])
            argv[i] = str(config_dir / key)
    return argv


def _parse(workload: dict[str, Any], tmp_path: Path) -> Invocation:
    container = _container(workload)
    return parse_streamer(_streamer_argv(container, tmp_path), _env(container))


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_runs_a_real_streamer_command_with_its_config_and_secrets(name: str, tmp_path: Path) -> None:
    parsed = _parse(WORKLOADS[name], tmp_path)
    component = _pod(WORKLOADS[name])["metadata"]["labels"]["app.kubernetes.io/component"]
    assert parsed.path == {"agent": ("source", "run"), "target": ("target", "run")}[component]
    settings = parse_pairs(parsed.params["kafka_settings" if component == "agent" else "kafka_setting"])
    assert validate(settings)["security.protocol"] == "SASL_SSL"
    if component == "agent":
        assert parsed.params["notification_db"].startswith("postgresql://")
    assert built_settings(parsed) is not None  # what the command builds before it connects: no refusal


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_metrics_port_probes_and_annotations_agree(name: str, tmp_path: Path) -> None:
    workload = WORKLOADS[name]
    parsed = _parse(workload, tmp_path)
    container = _container(workload)
    port = parsed.params["metrics_port"]
    bind = parsed.params.get("metrics_host") or parsed.params.get("metrics_addr")
    assert bind == "0.0.0.0", "a loopback /metrics is unreachable for probes and Prometheus"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": port}
    assert _pod(workload)["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": "/metrics",
    }
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}
    services = [s for s in _objects("Service").values()
                if s["spec"]["selector"].items() <= _pod(workload)["metadata"]["labels"].items()]
    assert len(services) == 1, f"{name}: expected one Service selecting its pods"
    assert services[0]["spec"]["ports"] == [{"name": "metrics", "port": port, "targetPort": "metrics"}]


def test_every_workload_uses_the_same_streamer_image_as_non_root() -> None:
    images = {_container(w)["image"] for w in WORKLOADS.values()}
    assert len(images) == 1 and next(iter(images)).startswith("streamer:")
    for workload in WORKLOADS.values():
        assert _pod(workload)["spec"]["securityContext"] == {**_pod(workload)["spec"]["securityContext"],
                                                            "runAsNonRoot": True, "runAsUser": 10001}


def test_volumes_secrets_and_claims_exist() -> None:
    claims = set(_objects("PersistentVolumeClaim")) | EXTERNAL_CLAIMS
    for name, workload in WORKLOADS.items():
        spec = _pod(workload)["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert {m["name"] for m in _container(workload)["volumeMounts"]} == set(volumes), name
        for volume in volumes.values():
            if "configMap" in volume:
                assert volume["configMap"]["name"] in _objects("ConfigMap")
            if "secret" in volume:
                assert volume["secret"]["secretName"] in SECRETS
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims


def test_kafka_ca_file_is_mounted_where_the_settings_point() -> None:
    ca = parse_pairs(SECRETS["streamer-secrets"]["kafka-settings"].split())["ssl.ca.location"]
    for workload in WORKLOADS.values():
        mounts = {m["mountPath"]: m["name"] for m in _container(workload)["volumeMounts"]}
        directory, _, filename = ca.rpartition("/")
        volume = next(v for v in _pod(workload)["spec"]["volumes"] if v["name"] == mounts[directory])
        assert filename in SECRETS[volume["secret"]["secretName"]]


def test_spark_submit_job_runs_the_launcher_the_image_contains() -> None:
    job = _objects("Job")["streamer-target-dr"]
    container = _container(job)
    args = container["args"]
    launcher = next(a for a in args if a.endswith(".py"))
    assert launcher.startswith("/opt/streamer/")
    path = REPO / launcher.removeprefix("/opt/streamer/")
    assert "from streamer.cli import main" in path.read_text()
    assert _env(container)["SPARK_MASTER"] == args[args.index("--master") + 1]
    assert _pod(job)["spec"]["restartPolicy"] == "OnFailure"
    assert "COPY . /opt/streamer" in (REPO / "Dockerfile").read_text()


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert set(kustomization["resources"]) == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
