"""docker-compose.yml and the Dockerfile, checked without a Docker engine.

Every streamer service's command is parsed by streamer's own CLI (flags, types, env twins), ports
and volumes must line up with Prometheus' scrape config and the image, and the Dockerfile must
install what scripts/setup.sh (the README's set-up) installs.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tests.unit.deploy.helpers import DEPLOY, REPO, built_settings, envvars_of, parse_streamer

COMPOSE: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
STREAMER_SERVICES = sorted(name for name, s in SERVICES.items() if s.get("image", "").startswith("streamer:"))
DOCKERFILE = (REPO / "Dockerfile").read_text()


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    assert isinstance(env, dict), "environment must be a mapping"
    return {k: str(v) for k, v in env.items()}


def _flag(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
    return None


def test_the_stack_has_every_part_the_issue_names() -> None:
    expected = {"kafka", "postgres", "source-init", "source-workload", "source-agent", "hms-dr", "target-dr",
                "hms-replica", "target-replica", "prometheus", "grafana"}
    assert expected <= set(SERVICES)
    assert SERVICES["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft


@pytest.mark.parametrize("name", STREAMER_SERVICES)
def test_service_command_is_a_real_streamer_command(name: str) -> None:
    service = SERVICES[name]
    argv = [str(a) for a in service["command"]]
    parsed = parse_streamer(argv, _env(service))
    if not parsed.available:
        pytest.xfail(f"`streamer {' '.join(parsed.path)}` is not in this build yet")
    result = CliRunner().invoke(_cli(), [*argv, "--help"], env=_env(service))
    assert result.exit_code == 0, result.output
    assert f"Usage: cli {' '.join(parsed.path)} [OPTIONS]" in result.output
    unknown = {k for k in _env(service) if k.startswith("STREAMER_")} - envvars_of(parsed.path)
    assert not unknown, f"{name}: environment variables no option of `streamer {' '.join(parsed.path)}` reads"
    built_settings(parsed)  # what `source run` and `target run` build before they connect: no refusal


def _cli() -> Any:
    from streamer.cli import cli

    return cli


def test_metrics_ports_match_the_scrape_config_and_bind_beyond_loopback() -> None:
    scrape = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    scraped = {t for job in scrape["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    served = set()
    for name in STREAMER_SERVICES:
        argv = [str(a) for a in SERVICES[name]["command"]]
        port = _flag(argv, "--metrics-port")
        if port and port != "0":
            bind = _flag(argv, "--metrics-host") or _flag(argv, "--metrics-addr")
            assert bind == "0.0.0.0", f"{name}: /metrics on loopback cannot be scraped from another container"
            served.add(f"{name}:{port}")
    assert scraped == served


def test_metastore_uris_and_kafka_point_at_services_on_their_ports() -> None:
    for name in STREAMER_SERVICES:
        argv = [str(a) for a in SERVICES[name]["command"]]
        if (uri := _flag(argv, "--hms-uri")) is not None:
            host, port = re.fullmatch(r"thrift://([^:]+):(\d+)", uri).groups()  # type: ignore[union-attr]
            assert _flag([str(a) for a in SERVICES[host]["command"]], "--port") == port
            assert host in SERVICES[name]["depends_on"]
        if (servers := _flag(argv, "--bootstrap-servers")) is not None:
            assert servers == "kafka:9092"
            assert "PLAINTEXT://kafka:9092" in SERVICES["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]


def test_each_target_shares_its_warehouse_volume_with_its_own_metastore() -> None:
    for target, hms in (("target-dr", "hms-dr"), ("target-replica", "hms-replica")):
        t_argv = [str(a) for a in SERVICES[target]["command"]]
        h_argv = [str(a) for a in SERVICES[hms]["command"]]
        assert _flag(t_argv, "--warehouse-root") == _flag(h_argv, "--warehouse-dir")
        root = str(_flag(t_argv, "--warehouse-root"))
        shared = {v for v in SERVICES[target]["volumes"] if root.startswith(v.split(":")[1])} & set(
            SERVICES[hms]["volumes"]
        )
        assert shared, f"{target} and {hms} must mount the same volume at {root}"
    dr_db = _flag([str(a) for a in SERVICES["hms-dr"]["command"]], "--jdbc-url")
    assert dr_db != _flag([str(a) for a in SERVICES["hms-replica"]["command"]], "--jdbc-url")


def test_volumes_are_declared_and_mounted_on_directories_the_image_owns() -> None:
    declared = set(COMPOSE["volumes"])
    owned = re.search(r"mkdir -p ([^\\&]+)", DOCKERFILE)
    assert owned is not None
    owned_dirs = owned.group(1).split()
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            if source.startswith("./"):
                assert (REPO / source).exists(), f"{name}: bind mount {source} does not exist"
                continue
            assert source in declared, f"{name}: volume {source} is not declared"
            if name in STREAMER_SERVICES:
                owned_by_user = any(target.startswith(d) for d in owned_dirs)
                assert owned_by_user, f"{name}: {target} is not created for the image's user"


def test_published_ports_are_unique() -> None:
    ports = [p.split(":")[0] for s in SERVICES.values() for p in s.get("ports", [])]
    assert len(ports) == len(set(ports))


def test_prometheus_and_grafana_are_provisioned_from_deploy() -> None:
    prom = SERVICES["prometheus"]
    assert "./deploy/prometheus:/etc/prometheus:ro" in prom["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prom["command"]
    grafana_mounts = {v.split(":")[0]: v.split(":")[1] for v in SERVICES["grafana"]["volumes"]}
    provider = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/streamer.yml").read_text())
    assert grafana_mounts["./deploy/grafana/dashboards"] == provider["providers"][0]["options"]["path"]
    datasource = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"


def test_dockerfile_installs_what_setup_sh_installs() -> None:
    setup = (REPO / "scripts" / "setup.sh").read_text()
    apt_packages = set(re.findall(r"apt_install ([a-z0-9.+-]+)", setup))  # the runtime's, not the tests'
    assert apt_packages == {"openjdk-17-jdk-headless", "libpostgresql-jdbc-java", "libkrb5-dev"}
    assert {"prometheus", "krb5-kdc"} <= set(re.findall(r"apt_install_for_tests ([a-z0-9.+-]+)", setup))
    install_line = re.search(r"apt-get install[^\n]*", DOCKERFILE)
    assert install_line is not None and apt_packages <= set(install_line.group(0).split())
    base = re.search(r"^FROM python:(\d+)\.(\d+)\S*-(bookworm|bullseye|trixie)", DOCKERFILE, re.M)
    assert base is not None, "a Debian Python base image"
    assert (int(base.group(1)), int(base.group(2))) >= (3, 11)
    assert "-m venv" in setup and "-m venv" in DOCKERFILE
    assert re.search(r"pip install [^\n]*-e '?\.", DOCKERFILE), "the repository is installed editable"
    assert re.search(r'^ENTRYPOINT \["streamer"\]', DOCKERFILE, re.M)


def test_dockerignore_keeps_what_the_install_needs() -> None:
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    for needed in ("pyproject.toml", "streamer", "schemas", "README.md", "deploy"):
        assert needed not in ignored
    assert ".venv" in ignored
