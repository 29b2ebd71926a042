"""A state dir is bound to its target (source id, topic, metastore) by its first job, and a command
given another target's state dir refuses in one line (issue 40 item 5)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from streamer.errors import ConfigError
from streamer.events.model import DatabaseSnapshot
from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.target.state.binding import (
    BINDING_FILE,
    Binding,
    Given,
    bind,
    check_state_dir,
    endpoints,
    has_state,
    metastore_evidence,
    read_binding,
    same_address,
)
from streamer.target.state.chain import Anchor, write_anchor
from streamer.target.state.status import write_mode, write_progress

HMS = "thrift://hms-a:9083"


def _catalog(**dbs: tuple[str, int]) -> MemoryCatalog:
    """A metastore holding ``name=(source id, repl.last.id)`` replicas."""
    catalog = MemoryCatalog()
    for name, (owner, last) in dbs.items():
        catalog.create_database(DatabaseSnapshot(name=name, parameters={REPL_SOURCE_PARAM: owner,
                                                                        LAST_ID_PARAM: str(last)}))
    return catalog


def _bound(tmp_path: Path) -> Path:
    """The state dir of source 'prod' (topic t.prod) on ``HMS`` that applied sales through 30."""
    bind(tmp_path, "prod", "t.prod", HMS, _catalog())
    write_progress(tmp_path, {"sales": (30, 1700), "hr": (12, 1700)}, consumed_event_id=31)
    return tmp_path


def _lend(catalog: Any) -> Any:
    return lambda: contextlib.nullcontext(catalog)


@pytest.mark.parametrize(("a", "b", "same"), [
    ("thrift://hms-a:9083", "thrift://HMS-A.:9083", True),
    ("thrift://hms-a", "thrift://hms-a:9083", True),  # Hive's default port
    ("thrift://hms-a:9083,thrift://hms-b:9083", "thrift://hms-b:9083", True),  # one of an HA list
    ("thrift://hms-a:9083", "thrift://hms-a:9084", False),
    ("thrift://hms-a:9083", "thrift://hms-b:9083", False),
])
def test_metastore_addresses_compare_by_endpoint(a: str, b: str, same: bool) -> None:
    assert same_address(a, b) is same


def test_endpoints_spell_each_address_one_way() -> None:
    assert endpoints(" thrift://H1:1, thrift://h2 ") == {("h1", 1), ("h2", 9083)}


def test_the_first_job_binds_the_state_dir(tmp_path: Path) -> None:
    assert not has_state(tmp_path)
    bind(tmp_path, "prod", "t.prod", HMS, _catalog())
    binding = read_binding(tmp_path)
    assert binding is not None and binding.since
    assert (binding.source_id, binding.topic, binding.hms_uri) == ("prod", "t.prod", HMS)
    assert has_state(tmp_path)


@pytest.mark.parametrize(("given", "says"), [
    (Given(source_id="dev"), "--source-id dev: --state-dir {d} belongs to another target (source 'prod', "
                             "topic t.prod, metastore thrift://hms-a:9083); give this target's own "
                             "--state-dir, or --source-id prod"),
    (Given(topic="t.dev"), "--topic t.dev: --state-dir {d} belongs to another target (source 'prod', topic "
                           "t.prod, metastore thrift://hms-a:9083); give this target's own --state-dir, or "
                           "--topic t.prod"),
])
def test_another_source_or_topic_is_refused_in_one_line(tmp_path: Path, given: Given, says: str) -> None:
    _bound(tmp_path)
    with pytest.raises(ConfigError) as refused:
        check_state_dir(tmp_path, given)
    assert str(refused.value) == says.format(d=tmp_path)
    assert "\n" not in str(refused.value)


def test_the_bound_target_or_an_unbound_dir_passes(tmp_path: Path) -> None:
    assert check_state_dir(tmp_path, Given("anything", "any", "thrift://x:1")) is None  # not bound yet
    _bound(tmp_path)
    assert check_state_dir(tmp_path, Given("prod", "t.prod", "thrift://HMS-A")) == read_binding(tmp_path)
    assert check_state_dir(tmp_path, Given()) is not None  # retry, skip: nothing to compare


def test_another_address_of_the_same_metastore_is_accepted_by_what_it_holds(tmp_path: Path) -> None:
    """A bastion's DNS name for the metastore the job reaches by its service name."""
    _bound(tmp_path)
    here = _catalog(sales=("prod", 31), hr=("prod", 12))
    assert check_state_dir(tmp_path, Given(hms_uri="thrift://hms.example.com:9083"), _lend(here)) is not None


@pytest.mark.parametrize(("dbs", "says"), [
    ({}, "it holds none of this state dir's databases as replicas of source 'prod': hr, sales"),
    ({"sales": ("prod", 3), "hr": ("prod", 12)},
     "its replicas are behind this state dir's progress: sales at event 3 there, 30 recorded here"),
    ({"sales": ("dev", 40)}, "it holds none of this state dir's databases as replicas of source 'prod': hr, "
                             "sales (sales (replicated from 'dev'))"),
])
def test_another_metastore_is_refused_naming_what_it_holds(
    tmp_path: Path, dbs: dict[str, tuple[str, int]], says: str
) -> None:
    """Hub and spoke: the spoke's metastore given the hub's state dir (the spoke is behind, or empty)."""
    _bound(tmp_path)
    with pytest.raises(ConfigError) as refused:
        check_state_dir(tmp_path, Given(hms_uri="thrift://spoke:9083"), _lend(_catalog(**dbs)))
    assert str(refused.value) == (
        f"--hms-uri thrift://spoke:9083: --state-dir {tmp_path} belongs to another target (source 'prod', "
        f"topic t.prod, metastore thrift://hms-a:9083); {says}. Give this target's own --state-dir, or "
        "--hms-uri thrift://hms-a:9083")


def test_another_address_is_refused_when_nothing_can_tell(tmp_path: Path) -> None:
    bind(tmp_path, "prod", "t.prod", HMS, _catalog())  # a job that applied nothing yet
    with pytest.raises(ConfigError, match="records no progress yet, so nothing shows it is the same"):
        check_state_dir(tmp_path, Given(hms_uri="thrift://other:9083"), _lend(_catalog()))
    with pytest.raises(ConfigError, match="the address differs, so nothing shows it is the same"):
        check_state_dir(tmp_path, Given(hms_uri="thrift://other:9083"))


def test_evidence_reads_the_db_map_names_of_the_progress(tmp_path: Path) -> None:
    bind(tmp_path, "prod", "t.prod", HMS, _catalog())
    write_mode(tmp_path, "global", 4, {"sales": "sales7"})
    write_progress(tmp_path, {"sales": (30, 1)}, 30)
    here = _catalog(sales7=("prod", 30))
    assert check_state_dir(tmp_path, Given(hms_uri="thrift://alias:9083"), _lend(here)) is not None


def test_a_job_on_a_new_address_of_its_metastore_records_it(tmp_path: Path) -> None:
    _bound(tmp_path)
    bind(tmp_path, "prod", "t.prod", "thrift://hms-new:9083", _catalog(sales=("prod", 30)))
    binding = read_binding(tmp_path)
    assert binding is not None and binding.hms_uri == "thrift://hms-new:9083"


def test_a_job_on_another_metastore_is_refused_and_binds_nothing(tmp_path: Path) -> None:
    _bound(tmp_path)
    before = (tmp_path / BINDING_FILE).read_text()
    with pytest.raises(ConfigError, match=r"--hms-uri thrift://spoke:9083: .* belongs to another target"):
        bind(tmp_path, "prod", "t.prod", "thrift://spoke:9083", _catalog())
    assert (tmp_path / BINDING_FILE).read_text() == before


def test_a_state_dir_of_an_earlier_release_is_adopted_by_its_own_job(tmp_path: Path) -> None:
    write_progress(tmp_path, {"sales": (30, 1)}, 30)
    write_anchor(tmp_path, Anchor("t.prod", 40, 30))
    assert read_binding(tmp_path) is None and has_state(tmp_path)
    bind(tmp_path, "prod", "t.prod", HMS, _catalog(sales=("prod", 30)))
    assert read_binding(tmp_path) == Binding("prod", "t.prod", HMS, read_binding(tmp_path).since)  # type: ignore[union-attr]


@pytest.mark.parametrize(("topic", "dbs", "says"), [
    ("t.dev", {"sales": ("prod", 30)},
     "--topic t.dev: --state-dir {d} holds the event chain of topic t.prod"),
    ("t.prod", {"sales": ("prod", 2)}, "--hms-uri thrift://hms-a:9083: --state-dir {d} does not belong to "
                                       "this metastore (its replicas are behind"),
])
def test_a_state_dir_of_an_earlier_release_is_not_adopted_by_another_target(
    tmp_path: Path, topic: str, dbs: dict[str, tuple[str, int]], says: str
) -> None:
    write_progress(tmp_path, {"sales": (30, 1)}, 30)
    write_anchor(tmp_path, Anchor("t.prod", 40, 30))
    with pytest.raises(ConfigError) as refused:
        bind(tmp_path, "prod", topic, HMS, _catalog(**dbs))
    assert str(refused.value).startswith(says.format(d=tmp_path))
    assert read_binding(tmp_path) is None


def test_evidence_is_pure_and_tri_state() -> None:
    assert metastore_evidence({}, {}, "p").same is None
    assert metastore_evidence({"a": 5}, {"a": ("p", 5)}, "p").same is True
    assert metastore_evidence({"a": 5, "gone": 9}, {"a": ("p", 7), "gone": None}, "p").same is True
    assert metastore_evidence({"a": 5, "b": 5}, {"a": ("p", 7), "b": ("p", 4)}, "p").same is False
    assert metastore_evidence({"a": 5}, {"a": (None, 0)}, "p").detail.endswith("a (not a replica))")
