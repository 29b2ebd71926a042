"""The consumer group a target tells its position to: when it commits, what it is called, and that it
never commits without a group (pure parts; the commits themselves: tests/integration/kafka)."""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

from streamer.kafka.group_commit import REFRESH_S, GroupCommitter, commit_due
from streamer.kafka.naming import target_group
from streamer.target.job.batch_source import consumer_group
from streamer.target.job.settings import (
    KafkaSettings,
    LayoutSettings,
    MetastoreSettings,
    TargetSettings,
)


def test_a_commit_is_due_on_a_new_offset_or_when_the_last_one_is_old() -> None:
    assert commit_due(None, 0, 0.0)
    assert commit_due((5, 100.0), 6, 100.1)
    assert not commit_due((5, 100.0), 5, 100.0 + REFRESH_S - 1)
    assert commit_due((5, 100.0), 5, 100.0 + REFRESH_S)  # an idle group is kept from expiring


@given(st.lists(st.integers(min_value=0, max_value=50), max_size=30))
def test_unchanged_offsets_are_committed_once_per_refresh(offsets: list[int]) -> None:
    last: tuple[int, float] | None = None
    commits = 0
    for offset in offsets:
        if commit_due(last, offset, 0.0):
            last, commits = (offset, 0.0), commits + 1
    assert commits == sum(1 for i, o in enumerate(offsets) if i == 0 or offsets[i - 1] != o)


def test_without_a_group_nothing_is_made_or_committed() -> None:
    committer = GroupCommitter({"bootstrap.servers": "127.0.0.1:1"}, "", "t", 0)
    committer.consumed(7)
    assert committer._consumer is None and committer._last is None
    committer.close()


def test_a_pickled_committer_leaves_its_consumer_behind() -> None:
    committer = GroupCommitter({"bootstrap.servers": "127.0.0.1:1"}, "g", "t", 0)
    committer._last = (3, 1.0)
    copy = pickle.loads(pickle.dumps(committer))
    assert copy.group == "g" and copy._consumer is None and copy._last is None


def test_the_default_group_names_source_and_metastore_and_tells_targets_apart() -> None:
    dr = target_group("sales", "thrift://hms-dr.example.com:9083", "/var/lib/streamer/dr")
    assert dr.startswith("streamer-target-sales-hms-dr.example.com-") and len(dr.rsplit("-", 1)[1]) == 8
    assert dr == target_group("sales", "thrift://hms-dr.example.com:9083", "/var/lib/streamer/dr")
    # two targets of one source on one metastore (--db-map): other state dirs, other groups
    assert dr != target_group("sales", "thrift://hms-dr.example.com:9083", "/var/lib/streamer/dr2")
    assert dr != target_group("sales", "thrift://hms-other:9083", "/var/lib/streamer/dr")
    odd = target_group("a b/c", "thrift://[::1]:9083,thrift://b:9083", "/x")
    assert all(c.isalnum() or c in "._-" for c in odd), odd


def _settings(state_dir: str = "state", consumer_group: str | None = None) -> TargetSettings:
    return TargetSettings(
        source_id="s1",
        kafka=KafkaSettings(bootstrap_servers="h:1", topic="t", consumer_group=consumer_group),
        metastore=MetastoreSettings(uri="thrift://hms:9083"),
        layout=LayoutSettings(warehouse_root="/wh", state_dir=state_dir, checkpoint_dir="ckpt"),
    )


def test_the_job_commits_to_its_default_group_unless_told_another_or_none() -> None:
    assert consumer_group(_settings()).startswith("streamer-target-s1-hms-")
    assert consumer_group(_settings()) == consumer_group(_settings(state_dir="./state"))  # absolute
    assert consumer_group(_settings(consumer_group="dr-lag")) == "dr-lag"
    assert consumer_group(_settings(consumer_group="")) == ""
