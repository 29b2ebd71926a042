"""deploy/prometheus: promtool checks the config and rules and runs the alert unit tests; every
expression names only series streamer exports, and every alert is tested firing and not firing."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.unit.deploy.helpers import DEPLOY, exported_series, metric_names_in, selector_labels

PROM = DEPLOY / "prometheus"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (Debian/Ubuntu: apt-get install prometheus)"
)
RULES: dict[str, Any] = yaml.safe_load((PROM / "alerts.yml").read_text())
ALL_RULES = [rule for group in RULES["groups"] for rule in group["rules"]]
ALERTS = sorted(rule["alert"] for rule in ALL_RULES if "alert" in rule)
RECORDED = {rule["record"] for rule in ALL_RULES if "record" in rule}
SCRAPE_LABELS = {"job", "instance", "source", "target", "namespace", "pod"}


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=PROM, capture_output=True, text=True, timeout=60)


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    result = _promtool("check", "rules", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_checks_the_compose_scrape_config() -> None:
    result = _promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_checks_the_kubernetes_scrape_config() -> None:
    result = _promtool("check", "config", "prometheus-k8s.yml")
    if "field kubernetes_sd_configs not found" in result.stdout + result.stderr:
        pytest.skip("this promtool is built without Kubernetes service discovery (Debian's package)")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_alert_unit_tests_pass() -> None:
    result = _promtool("test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_rule_expressions_name_only_exported_series_and_labels() -> None:
    exported = exported_series()
    for rule in ALL_RULES:
        expr = rule["expr"]
        for name in metric_names_in(expr):
            assert name in exported or name in RECORDED or name == "up", f"{rule}: unknown series {name}"
        for name, labels in selector_labels(expr).items():
            allowed = exported.get(name, set()) | SCRAPE_LABELS
            assert labels <= allowed, f"{name} has no label {labels - allowed}"


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    tests = yaml.safe_load((PROM / "alerts_test.yml").read_text())
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in tests["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    assert set(ALERTS) == firing, "alerts without a firing test"
    assert set(ALERTS) == quiet, "alerts without a not-firing test"


def test_alerts_have_severity_and_summary() -> None:
    for rule in ALL_RULES:
        if "alert" in rule:
            assert rule["labels"]["severity"] in {"warning", "critical"}
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_scrape_configs_use_the_job_names_the_alerts_key_on() -> None:
    compose = yaml.safe_load((PROM / "prometheus.yml").read_text())
    jobs = {job["job_name"] for job in compose["scrape_configs"]}
    assert jobs == {"streamer-agent", "streamer-target"}
    k8s = yaml.safe_load((PROM / "prometheus-k8s.yml").read_text())["scrape_configs"][0]
    job_rule = next(r for r in k8s["relabel_configs"] if r.get("target_label") == "job")
    assert job_rule["replacement"] == "streamer-$1" and job_rule["regex"] == "(agent|target)"
