"""The crash campaign in CI: seeded workloads, SIGKILLed agent and target, 0 violations.

Size from the environment (the defaults are what CI runs): ``STREAMER_CAMPAIGN_WORKLOADS`` (5),
``STREAMER_CAMPAIGN_EVENTS`` (1000 per workload), ``STREAMER_CAMPAIGN_KILLS`` (1 SIGKILL of each
process per workload), ``STREAMER_CAMPAIGN_SEED`` (0). ``bench/consistency.py`` runs the long one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamer.hms.server import EmbeddedMetastore
from streamer.kafka.broker import EmbeddedBroker
from streamer.testing.campaign import CampaignConfig, run_campaign

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WORKLOADS = int(os.environ.get("STREAMER_CAMPAIGN_WORKLOADS", "5"))
EVENTS = int(os.environ.get("STREAMER_CAMPAIGN_EVENTS", "1000"))
KILLS = int(os.environ.get("STREAMER_CAMPAIGN_KILLS", "1"))
SEED = int(os.environ.get("STREAMER_CAMPAIGN_SEED", "0"))


@pytest.mark.timeout(3600)
def test_replica_shows_only_source_prefixes_through_crashes(
    broker: EmbeddedBroker, hms: EmbeddedMetastore, tmp_path: Path
) -> None:
    result = run_campaign(CampaignConfig(
        bootstrap_servers=broker.bootstrap_servers, hms_uri=hms.uri, work_dir=tmp_path,
        workloads=WORKLOADS, events=EVENTS, kills=KILLS, seed=SEED,
    ))
    print(f"\ncampaign: {result.summary()}; {result.discarded} samples discarded; "
          f"{result.seconds:.0f} s\n{result.report.summary()}")
    assert result.agent_kills == result.target_kills == WORKLOADS * KILLS
    assert result.events >= WORKLOADS * EVENTS
    assert result.samples > 10 * WORKLOADS, "too few samples to show anything"
    assert not result.sampler_errors, result.sampler_errors[:5]
    assert result.report.ok, result.report.summary(20)
