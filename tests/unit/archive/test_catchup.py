"""Which archive files a target past the topic's retention needs, and from where (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.archive.catchup import plan_catch_up, position_of
from streamer.archive.manifest import Entry, Manifest, file_name
from streamer.errors import ConfigError, DataLossError

TOPIC, SOURCE = "t", "s"


def _manifest(ranges: list[tuple[int, int]]) -> Manifest:
    manifest, event = Manifest(TOPIC, SOURCE), 1
    prev: int | None = None
    for first, last in ranges:
        n = last - first + 1
        entry = Entry(file_name(first, last), first, last, event, event + n - 1, prev,
                      event + n - 2 if n > 1 else prev, n, 10, "0" * 64)
        manifest = manifest.with_entry(entry)
        prev, event = event + n - 1, event + n
    return manifest


@st.composite
def _archives(draw: st.DrawFn) -> list[tuple[int, int]]:
    start = draw(st.integers(0, 20))
    out = []
    for size in draw(st.lists(st.integers(1, 10), min_size=1, max_size=6)):
        out.append((start, start + size - 1))
        start += size + draw(st.integers(0, 2))  # offsets of transaction markers hold no record
    return out


def test_the_position_is_the_checkpoint_s_else_after_the_anchor_else_the_start() -> None:
    assert position_of(40, 12) == 40
    assert position_of(None, 12) == 13
    assert position_of(None, None) == 0


@settings(max_examples=200)
@given(_archives(), st.integers(0, 80), st.integers(0, 80))
def test_the_files_from_the_position_on_are_applied_in_order_with_their_predecessors(
    ranges: list[tuple[int, int]], position: int, low: int
) -> None:
    manifest = _manifest(ranges)
    plan = plan_catch_up(manifest, TOPIC, SOURCE, position, low, "arch")
    if position >= low:
        assert not plan.needed
        return
    chosen = [entry for _, entry in plan.files]
    assert chosen == [e for e in manifest.files if e.last_offset >= position]
    assert all(e.last_offset >= position for e in chosen)
    for before, entry in plan.files:  # each with the entry before it, for the chain check
        index = manifest.files.index(entry)
        assert before == (manifest.files[index - 1] if index else None)


def test_a_target_past_retention_with_no_archive_is_data_loss() -> None:
    with pytest.raises(DataLossError, match=r"from offset 3, but the topic starts at offset 9 and archive "
                                            r"arch holds no records"):
        plan_catch_up(None, TOPIC, SOURCE, 3, 9, "arch")
    assert not plan_catch_up(None, TOPIC, SOURCE, 9, 9, "arch").needed  # on the topic: no archive read


def test_an_archive_of_another_topic_or_source_is_refused() -> None:
    with pytest.raises(ConfigError, match="archives topic 't' of source 's', not 'u' of 's'"):
        plan_catch_up(_manifest([(0, 4)]), "u", SOURCE, 0, 3, "arch")
    with pytest.raises(ConfigError, match="not 't' of 'other'"):
        plan_catch_up(_manifest([(0, 4)]), TOPIC, "other", 0, 3, "arch")
