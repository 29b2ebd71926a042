"""deploy/prometheus: promtool checks the config and rules and runs the alert unit tests; every
expression names only series streamer exports, and every alert is tested firing and not firing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
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


_NO_K8S_SD = "field kubernetes_sd_configs not found"


@needs_promtool
def test_promtool_checks_the_kubernetes_scrape_config(tmp_path: Path) -> None:
    """The whole file needs a promtool built with Kubernetes service discovery (the upstream release
    from prometheus.io or the prom/prometheus image; Debian's and Ubuntu's `prometheus` packages leave
    it out). Any other promtool checks everything else in it: the same file with the discovery block
    swapped for a static target, next to the rules it loads."""
    result = _promtool("check", "config", "prometheus-k8s.yml")
    if _NO_K8S_SD not in result.stdout + result.stderr:
        assert result.returncode == 0, result.stdout + result.stderr
        return
    config = yaml.safe_load((PROM / "prometheus-k8s.yml").read_text())
    for job in config["scrape_configs"]:
        assert job.pop("kubernetes_sd_configs") == [{"role": "pod"}], job
        job["static_configs"] = [{"targets": ["pod:9402"]}]
    (tmp_path / "prometheus-k8s.yml").write_text(yaml.safe_dump(config))
    shutil.copy(PROM / "alerts.yml", tmp_path / "alerts.yml")
    assert PROMTOOL is not None
    checked = subprocess.run([PROMTOOL, "check", "config", "prometheus-k8s.yml"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


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


# What operators must hear of without watching a dashboard: each family is read by some alert.
ALERTED = (
    "streamer_target_halted", "streamer_target_data_loss", "streamer_source_gap",
    "streamer_target_lag_events",
    "streamer_target_watermark_event_id", "streamer_target_watermark_write_failures_total",
    "streamer_verify_drift_objects", "streamer_verify_source_drift_objects", "streamer_verify_failures_total",
    "streamer_verify_last_run_timestamp_seconds", "streamer_target_tables_synced_by_state",
    "streamer_target_cm_fallbacks_total",
    # issue 40: an agent cut off from Kafka, and a target that reads nothing while its topic moves on
    "streamer_source_errors_total", "streamer_source_lag_events", "streamer_source_last_event_id",
    "streamer_target_source_head_event_id",
)


def test_what_operators_must_hear_of_has_an_alert() -> None:
    read = {name for rule in ALL_RULES if "alert" in rule for name in metric_names_in(rule["expr"])}
    read |= {  # through a recording rule
        name for rule in ALL_RULES if "record" in rule for name in metric_names_in(rule["expr"])
        if any(rule["record"] in metric_names_in(r["expr"]) for r in ALL_RULES if "alert" in r)
    }
    exported = exported_series()
    for family in ALERTED:
        assert family in exported, f"{family} is not exported any more"
        assert family in read, f"no alert reads {family}"
