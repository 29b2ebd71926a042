"""deploy/grafana: the provisioned dashboard queries only series streamer exports, by labels they have."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import yaml

from tests.unit.deploy.helpers import DEPLOY, exported_series, metric_names_in, selector_labels

DASHBOARD: dict[str, Any] = json.loads((DEPLOY / "grafana/dashboards/streamer.json").read_text())
SCRAPE_LABELS = {"job", "instance", "source", "target"}


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def _queries() -> Iterator[tuple[str, str]]:
    for panel in _panels(DASHBOARD["panels"]):
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]
    for variable in DASHBOARD["templating"]["list"]:
        yield f"variable {variable['name']}", variable["query"]["query"]


def test_every_query_names_exported_series_with_their_labels() -> None:
    exported = exported_series()
    for title, expr in _queries():
        names = metric_names_in(expr)
        assert names, f"{title}: query names no series"
        for name in names:
            assert name in exported or name == "up", f"{title}: {name} is not exported by streamer"
        for name, labels in selector_labels(expr).items():
            allowed = exported.get(name, set()) | SCRAPE_LABELS
            assert labels <= allowed, f"{title}: {name} has no label {labels - allowed}"


def test_dashboard_covers_what_operators_watch() -> None:
    used = {name for _, expr in _queries() for name in metric_names_in(expr)}
    for needed in (
        "streamer_target_last_applied_event_id", "streamer_target_source_head_event_id",
        "streamer_target_lag_seconds_bucket", "streamer_target_events_applied_total",
        "streamer_target_bytes_copied_total", "streamer_target_cm_fallbacks_total", "streamer_target_halted",
        "streamer_target_txns_committed_total", "streamer_target_txns_aborted_total",
        "streamer_target_aborted_bytes_skipped_total",
    ):
        assert needed in used, needed
    quantiles = [expr for _, expr in _queries() if "streamer_target_lag_seconds_bucket" in expr]
    assert any("histogram_quantile(0.5," in q for q in quantiles)
    assert any("histogram_quantile(0.99," in q for q in quantiles)


def test_panels_use_the_provisioned_datasource_and_unique_ids() -> None:
    datasource = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    uid = datasource["datasources"][0]["uid"]
    panels = list(_panels(DASHBOARD["panels"]))
    assert len({p["id"] for p in panels}) == len(panels)
    for panel in panels:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == uid, panel["title"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]


def test_dashboard_filters_by_target_and_database() -> None:
    names = {v["name"] for v in DASHBOARD["templating"]["list"]}
    assert names == {"target", "db"}
    per_db = [expr for _, expr in _queries() if 'db=~"$db"' in expr]
    assert per_db and all("target=~\"$target\"" in expr for expr in per_db)


def test_every_exported_family_has_a_panel() -> None:
    """Whatever streamer exports is on the dashboard: a family nobody can see is a family nobody reads."""
    from streamer.metrics import REGISTRY

    used = {name for _, expr in _queries() for name in metric_names_in(expr)}
    exported = exported_series()
    for family in REGISTRY.collect():
        suffixes = ("", "_total", "_bucket", "_sum", "_count")
        series = {family.name + suffix for suffix in suffixes} & set(exported)
        assert series & used, f"no panel shows {family.name}"
