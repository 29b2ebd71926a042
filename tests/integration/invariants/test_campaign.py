"""The crash campaign: seeded workloads, SIGKILLed agent and target, 0 violations.

Each campaign runs at two sizes: ``smoke`` in the CI tier (``make test-ci``: one workload, one
SIGKILL of each process, a few minutes in all) and ``full`` in the full tier (``make test-all``,
marked ``slow``): the invariants issue's 5 seeded workloads x 1,000 events with 5 SIGKILLs of the
agent and 5 of the target job per workload (about 12-20 minutes here). The environment overrides
the global campaign's size: ``STREAMER_CAMPAIGN_WORKLOADS``, ``STREAMER_CAMPAIGN_EVENTS``,
``STREAMER_CAMPAIGN_KILLS``, ``STREAMER_CAMPAIGN_SEED``. ``bench/consistency.py`` runs the long
campaign with a printed summary.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.kafka.broker import EmbeddedBroker
from streamer.testing.campaign import CampaignConfig, CampaignResult, run_campaign

pytestmark = [pytest.mark.integration]

SEED = int(os.environ.get("STREAMER_CAMPAIGN_SEED", "0"))


Size = tuple[int, int, int]  # workloads, events per workload, SIGKILLs of each process per workload


def sizes(smoke: Size, full: Size) -> pytest.MarkDecorator:
    """The campaign at ``smoke`` size in the CI tier and at ``full`` size in the full tier."""
    return pytest.mark.parametrize("size", [
        pytest.param(smoke, id="smoke", marks=pytest.mark.ci),
        pytest.param(full, id="full", marks=pytest.mark.slow),
    ])


def _size(default: Size) -> Size:
    env = os.environ.get
    return (
        int(env("STREAMER_CAMPAIGN_WORKLOADS", str(default[0]))),
        int(env("STREAMER_CAMPAIGN_EVENTS", str(default[1]))),
        int(env("STREAMER_CAMPAIGN_KILLS", str(default[2]))),
    )


def _judged_clean(result: CampaignResult, tmp_path: Path, workloads: int, kills: int) -> str:
    """Every kill happened, enough samples were judged and none violated; the target's log."""
    assert result.agent_kills == result.target_kills == workloads * kills
    assert result.samples > 10 * workloads, "too few samples to show anything"
    assert not result.sampler_errors, result.sampler_errors[:5]
    # the embedded Derby metastore now and then fails a read of a table being changed: rare, or the
    # samples would not show much
    assert len(result.read_failures) <= result.samples // 100, result.read_failures[:5]
    assert result.report.ok, f"{result.report.summary(5)}\n(every violation: {tmp_path}/violations.txt)"
    return (tmp_path / "target.log").read_text(errors="replace")


@pytest.mark.timeout(3600)
@sizes(smoke=(1, 200, 1), full=(5, 1000, 5))
def test_replica_shows_only_source_prefixes_through_crashes(
    broker: EmbeddedBroker, hms: EmbeddedMetastore, tmp_path: Path, size: Size
) -> None:
    workloads, events, kills = _size(size)
    result = run_campaign(CampaignConfig(
        bootstrap_servers=broker.bootstrap_servers, hms_uri=hms.uri, work_dir=tmp_path,
        workloads=workloads, events=events, kills=kills, seed=SEED, name=f"campaign{events}",
    ))
    print(f"\ncampaign: {result.summary()}; {result.discarded} samples discarded; "
          f"{len(result.read_failures)} reads the metastore failed; {result.seconds:.0f} s\n"
          f"{result.report.summary()}")
    assert result.events >= workloads * events
    _judged_clean(result, tmp_path, workloads, kills)


@pytest.mark.timeout(1800)
@sizes(smoke=(1, 200, 1), full=(2, 300, 2))
def test_database_lanes_show_per_database_prefixes_through_crashes(
    broker: EmbeddedBroker, hms: EmbeddedMetastore, tmp_path: Path, size: Size
) -> None:
    """``--consistency database``: lanes apply each workload's three databases concurrently; judged
    per database (the mode's promise), through SIGKILLs of agent and target. Small: the global
    campaign above covers the apply logic; this covers lanes, barriers and per-lane recovery."""
    workloads, events, kills = size
    result = run_campaign(CampaignConfig(
        bootstrap_servers=broker.bootstrap_servers, hms_uri=hms.uri, work_dir=tmp_path,
        workloads=workloads, events=events, kills=kills, seed=SEED + 1, name=f"lanes{events}",
        consistency="database",
    ))
    print(f"\ncampaign (database lanes): {result.summary()}; {result.seconds:.0f} s\n"
          f"{result.report.summary()}")
    log = _judged_clean(result, tmp_path, workloads, kills)
    assert "consistency database" in log, "the target did not run in database mode"


@pytest.mark.timeout(1800)
@sizes(smoke=(1, 300, 1), full=(2, 400, 2))
def test_a_backlog_regrouped_per_table_shows_only_source_prefixes_through_crashes(
    broker: EmbeddedBroker, hms: EmbeddedMetastore, tmp_path: Path, size: Size
) -> None:
    """``--coalesce-backlog``: a batch of 8 or more events is applied regrouped per table behind the
    fence, its markers at its end; readers (which read again while a database is fenced) must still
    see only source prefixes, through SIGKILLs mid-batch. The workload runs faster than the target
    applies, so the target works on backlogs. Small: the global campaign above covers the rest."""
    workloads, events, kills = size
    result = run_campaign(CampaignConfig(
        bootstrap_servers=broker.bootstrap_servers, hms_uri=hms.uri, work_dir=tmp_path,
        workloads=workloads, events=events, kills=kills, seed=SEED + 2, name=f"coalesced{events}",
        rate=200.0, coalesce_backlog=True,
    ))
    print(f"\ncampaign (coalesced backlog): {result.summary()}; {result.seconds:.0f} s\n"
          f"{result.report.summary()}")
    log = _judged_clean(result, tmp_path, workloads, kills)
    fenced = [int(n) for n in re.findall(r"regrouped per table: .*\((\d+) fenced\)", log)]
    assert any(fenced), f"no backlog was regrouped out of order ({len(fenced)} regrouped batches)"
