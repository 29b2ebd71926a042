"""Failback: the old source's changes after the cut, grouped per object (pure)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from streamer.hive.notification import NotificationRow
from streamer.target.dr.failback import describe, divergence
from streamer.target.dr.failover import Cut, DatabaseCut


def row(event_id: int, kind: str, db: str | None, table: str | None = None) -> NotificationRow:
    return NotificationRow(event_id, 0, kind, "{}", "json-0.2", db, table)


CUT = Cut(event_id=10, source_head_event_id=12, consumed_event_id=10,
          databases=(DatabaseCut("sales", 10, 10), DatabaseCut("hr", 8, 10)))


def test_changes_after_the_cut_are_listed_per_object() -> None:
    rows = [row(9, "INSERT", "sales", "orders"), row(11, "INSERT", "sales", "orders"),
            row(12, "ADD_PARTITION", "SALES", "orders"), row(13, "CREATE_TABLE", "hr", "people"),
            row(14, "OPEN_TXN", None), row(15, "CREATE_DATABASE", "scratch"), row(16, "ALTER_DATABASE", "hr")]
    div = divergence(rows, CUT)
    assert [(o.name, o.event_ids, o.event_types, o.published) for o in div.objects] == [
        ("hr", (16,), ("ALTER_DATABASE",), False),
        ("hr.people", (13,), ("CREATE_TABLE",), False),
        ("sales.orders", (11, 12), ("INSERT", "ADD_PARTITION"), True),
    ]
    assert div.other_events == (14, 15) and div.events == 4 and div.old_source_head == 16
    text = describe(div)
    assert "sales.orders: events 11-12 (INSERT, ADD_PARTITION; published, not applied)" in text
    assert "hr.people: events 13 (CREATE_TABLE; never published)" in text


def test_nothing_after_the_cut_is_no_divergence() -> None:
    div = divergence([row(3, "INSERT", "sales", "t"), row(10, "INSERT", "sales", "t")], CUT)
    assert not div.objects and "no changes" in describe(div)


@given(st.lists(st.tuples(st.integers(1, 30), st.sampled_from(["sales", "hr", "x", None]),
                          st.sampled_from(["t", "u", None])), unique_by=lambda r: r[0]))
def test_every_event_after_the_cut_is_reported_once(spec: list[tuple[int, str | None, str | None]]) -> None:
    rows = [row(i, "INSERT", db, t) for i, db, t in spec]
    div = divergence(rows, CUT)
    listed = [i for o in div.objects for i in o.event_ids] + list(div.other_events)
    assert sorted(listed) == sorted(i for i, _, _ in spec if i > CUT.event_id)


class _Client:
    """The two Thrift calls ``drop_old_databases`` makes."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.dropped: list[tuple[str, bool, bool]] = []

    def get_all_databases(self) -> list[str]:
        return list(self.names)

    def drop_database(self, name: str, delete_data: bool, cascade: bool) -> None:
        self.dropped.append((name, delete_data, cascade))


def test_rebase_drops_the_failed_over_databases_that_exist() -> None:
    from streamer.target.dr.failback import drop_old_databases

    client = _Client(["default", "sales", "finance"])
    assert drop_old_databases(client, ["Sales", "gone", "finance"]) == ["finance", "sales"]
    assert client.dropped == [("finance", True, True), ("sales", True, True)]


def test_rebase_needs_the_old_source_metastore(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from streamer.cli import cli

    (tmp_path / "job-mode.json").write_text("{}")  # a state dir a job wrote
    result = CliRunner().invoke(cli, ["failback", "--state-dir", str(tmp_path), "--notification-db",
                                       "sqlite:///x.db", "--rebase"])
    assert result.exit_code != 0 and "--source-hms-uri" in str(result.exception or result.output)


def test_rebase_is_never_done_twice(tmp_path: Path) -> None:
    """After a rebase the old source may hold the new primary's replicas: --rebase changes nothing
    (it does not even connect to the old source)."""
    import json

    from click.testing import CliRunner

    from streamer.cli import cli
    from streamer.target.dr.failback import Divergence, record_failback
    from streamer.target.dr.failover import FailoverRecord, write_record

    write_record(tmp_path, FailoverRecord("done", "t0", "t1", CUT, ("sales",)))
    record_failback(tmp_path, Divergence(10, 12, ()), discarded=False, dropped=["sales"])
    result = CliRunner().invoke(cli, ["failback", "--state-dir", str(tmp_path), "--source-hms-uri",
                                      "thrift://127.0.0.1:1", "--rebase"])
    assert result.exit_code == 0, result.output
    assert "already rebased" in result.output and "dropped: sales" in result.output
    assert [r["dropped"] for r in json.loads((tmp_path / "failback.json").read_text())] == [["sales"]]


# --- the command, against metastores served in memory (Thrift stand-ins) ---------------------------

import json  # noqa: E402

import pytest  # noqa: E402
from click.testing import CliRunner, Result  # noqa: E402

from streamer.events.model import DatabaseSnapshot  # noqa: E402
from streamer.metastore.catalog import (  # noqa: E402
    FAILOVER_CUT_PARAM,
    LAST_ID_PARAM,
    REPL_SOURCE_PARAM,
    REPL_TARGET_PARAM,
)
from streamer.metastore.memory import MemoryCatalog  # noqa: E402

OLD, NEW = "thrift://old-hms:9083", "thrift://new-hms:9083"


class _Metastore:
    """One metastore as ``streamer failback`` reaches it: its databases and its notification log."""

    def __init__(self) -> None:
        self.catalog = MemoryCatalog()
        self.rows: list[NotificationRow] = []
        self.dropped: list[str] = []


class _Reader:
    def __init__(self, ms: _Metastore) -> None:
        self.ms = ms

    def read_after(self, last_id: int, limit: int) -> list[NotificationRow]:
        return sorted((r for r in self.ms.rows if r.event_id > last_id), key=lambda r: r.event_id)[:limit]

    def head_event_id(self) -> int:
        return max((r.event_id for r in self.ms.rows), default=0)

    def databases(self) -> set[str]:
        return set(self.ms.catalog.list_databases())

    def close(self) -> None:
        pass


class _ThriftClient:
    def __init__(self, ms: _Metastore) -> None:
        self.ms = ms

    def get_all_databases(self) -> list[str]:
        return self.ms.catalog.list_databases()

    def drop_database(self, name: str, delete_data: bool, cascade: bool) -> None:
        self.ms.catalog.drop_database(name)
        self.ms.dropped.append(name)

    def close(self) -> None:
        pass


@pytest.fixture
def metastores(monkeypatch: pytest.MonkeyPatch) -> dict[str, _Metastore]:
    """``--source-hms-uri`` -> a metastore in memory (reader, catalog and raw client)."""
    import streamer.metastore.thrift as metastore_thrift
    import streamer.metastore.transport as transport
    import streamer.source.thrift_reader as thrift_reader

    found = {OLD: _Metastore(), NEW: _Metastore()}
    monkeypatch.setattr(thrift_reader, "ThriftNotificationReader", lambda uri, **_: _Reader(found[uri]))
    monkeypatch.setattr(transport, "open_client", lambda uri, **_: _ThriftClient(found[uri]))
    monkeypatch.setattr(metastore_thrift, "HmsCatalog", lambda uri, **_: found[uri].catalog)
    return found


def _failback(state_dir: Path, *args: str) -> Result:
    from streamer.cli import cli

    return CliRunner().invoke(cli, ["failback", "--state-dir", str(state_dir), *args])


def _failed_over(state_dir: Path, new: MemoryCatalog, *names: str, last: int = 10) -> None:
    """``names`` replicated from SOURCE through event ``last``, then failed over on ``new``."""
    from streamer.target.dr.failover import failover
    from streamer.target.state.status import write_progress

    for name in names:
        new.create_database(DatabaseSnapshot(name=name, parameters={
            REPL_SOURCE_PARAM: "prod", REPL_TARGET_PARAM: "prod", LAST_ID_PARAM: str(last)}))
    write_progress(state_dir, {}, last)
    failover(state_dir, new, source_id="prod", source_head=last, new_primary_event_id=40)


def _records(state_dir: Path) -> list[dict[str, object]]:
    body = json.loads((state_dir / "failback.json").read_text())
    return body if isinstance(body, list) else [body]


def test_failback_refuses_the_new_primarys_metastore(tmp_path: Path,
                                                     metastores: dict[str, _Metastore]) -> None:
    """Issue 28.2: the new primary given as the old source must not be rebased (its databases carry
    this target's failover marks): nothing dropped, the earlier failback record kept."""
    old, new = metastores[OLD], metastores[NEW]
    old.catalog.create_database(DatabaseSnapshot(name="sales"))
    _failed_over(tmp_path, new.catalog, "sales")
    old.rows = [row(11, "INSERT", "sales", "orders")]
    first = _failback(tmp_path, "--source-hms-uri", OLD, "--discard-unreplicated")
    assert first.exit_code == 0, first.output
    before = (tmp_path / "failback.json").read_text()

    wrong = _failback(tmp_path, "--source-hms-uri", NEW, "--discard-unreplicated", "--rebase")
    assert wrong.exit_code != 0
    message = str(wrong.exception) + wrong.output
    assert "sales" in message and FAILOVER_CUT_PARAM in message and "new primary" in message
    assert new.dropped == [] and "sales" in new.catalog.list_databases()
    assert (tmp_path / "failback.json").read_text() == before


def test_failback_refuses_a_replica_of_the_same_source(tmp_path: Path,
                                                       metastores: dict[str, _Metastore]) -> None:
    """Another target of the failed-over source (its databases are replicas of it) is no old source."""
    old, new = metastores[OLD], metastores[NEW]
    _failed_over(tmp_path, new.catalog, "sales")
    old.catalog.create_database(DatabaseSnapshot(name="sales", parameters={
        REPL_SOURCE_PARAM: "prod", REPL_TARGET_PARAM: "prod", LAST_ID_PARAM: "12"}))
    refused = _failback(tmp_path, "--source-hms-uri", OLD, "--discard-unreplicated", "--rebase")
    assert refused.exit_code != 0 and old.dropped == []
    assert REPL_TARGET_PARAM in str(refused.exception) and "sales" in str(refused.exception)


def test_a_chained_old_source_is_not_refused(tmp_path: Path, metastores: dict[str, _Metastore]) -> None:
    """The old source may itself be a replica of another source, or carry an earlier failover of
    another stream (switching back): only this target's marks are refused."""
    old, new = metastores[OLD], metastores[NEW]
    _failed_over(tmp_path, new.catalog, "sales")
    old.catalog.create_database(DatabaseSnapshot(name="sales", parameters={
        REPL_SOURCE_PARAM: "upstream", REPL_TARGET_PARAM: "upstream", LAST_ID_PARAM: "7",
        FAILOVER_CUT_PARAM: "10", "repl.failover.time": "2020-01-01T00:00:00+00:00"}))
    done = _failback(tmp_path, "--source-hms-uri", OLD, "--rebase")
    assert done.exit_code == 0, done.output
    assert old.dropped == ["sales"]


def test_failback_records_are_appended_never_overwritten(tmp_path: Path,
                                                        metastores: dict[str, _Metastore]) -> None:
    old, new = metastores[OLD], metastores[NEW]
    old.catalog.create_database(DatabaseSnapshot(name="sales"))
    _failed_over(tmp_path, new.catalog, "sales")
    old.rows = [row(11, "INSERT", "sales", "orders")]
    assert _failback(tmp_path, "--source-hms-uri", OLD, "--discard-unreplicated").exit_code == 0
    rebase = _failback(tmp_path, "--source-hms-uri", OLD, "--discard-unreplicated", "--rebase")
    assert rebase.exit_code == 0, rebase.output
    records = _records(tmp_path)
    assert isinstance(json.loads((tmp_path / "failback.json").read_text()), list)
    assert [(r["discarded"], r["unreplicated_events"], r["dropped"]) for r in records] == [
        (True, 1, None), (True, 1, ["sales"])]
    again = _failback(tmp_path, "--source-hms-uri", OLD, "--rebase")
    assert again.exit_code == 0 and "already rebased" in again.output
    assert len(_records(tmp_path)) == 2


def test_an_old_single_record_failback_file_still_reads(tmp_path: Path) -> None:
    from streamer.target.dr.failback import read_failback, read_failbacks, record_failback
    from streamer.target.dr.failover import FailoverRecord, write_record

    write_record(tmp_path, FailoverRecord("done", "t0", "t1", CUT, ("sales",)))
    old = {"time": "t2", "discarded": True, "dropped": ["sales"], "cut_event_id": 10}
    (tmp_path / "failback.json").write_text(json.dumps(old))
    assert read_failbacks(tmp_path) == [old] and read_failback(tmp_path) == old
    result = _failback(tmp_path, "--source-hms-uri", "thrift://127.0.0.1:1", "--rebase")
    assert result.exit_code == 0 and "already rebased" in result.output
    record_failback(tmp_path, divergence([], CUT), discarded=False)
    assert read_failbacks(tmp_path)[0] == old and len(read_failbacks(tmp_path)) == 2


MAPPED = Cut(event_id=10, source_head_event_id=10, consumed_event_id=10,
             databases=(DatabaseCut("sales_dr", 10, 10),))


def _mapped_failover(state_dir: Path, old: _Metastore) -> None:
    """The forward job ran with --db-map sales:sales_dr; the old source changed sales.orders."""
    from streamer.target.dr.failover import FailoverRecord, write_record

    write_record(state_dir, FailoverRecord("done", "t0", "t1", MAPPED, ("sales_dr",)))
    old.catalog.create_database(DatabaseSnapshot(name="sales"))
    old.rows = [row(9, "INSERT", "sales", "orders"), row(11, "INSERT", "sales", "orders"),
                row(12, "CREATE_TABLE", "scratch", "t")]


def test_failback_without_the_forward_db_map_refuses(tmp_path: Path,
                                                     metastores: dict[str, _Metastore]) -> None:
    """Issue 28.3: the cut names target databases; without the map the old source's changes are
    nobody's, and the check must not say "no changes"."""
    _mapped_failover(tmp_path, metastores[OLD])
    result = _failback(tmp_path, "--source-hms-uri", OLD, "--discard-unreplicated", "--rebase")
    assert result.exit_code != 0
    message = str(result.exception)
    assert "sales_dr" in message and "--db-map" in message and "no changes" not in result.output
    assert metastores[OLD].dropped == [] and not (tmp_path / "failback.json").exists()


def test_failback_maps_db_map_names(tmp_path: Path, metastores: dict[str, _Metastore]) -> None:
    old = metastores[OLD]
    _mapped_failover(tmp_path, old)
    check = _failback(tmp_path, "--source-hms-uri", OLD, "--db-map", "sales:sales_dr")
    assert check.exit_code == 1, check.output
    assert "sales.orders (sales_dr.orders on the new primary): events 11 (INSERT; never published)" \
        in str(check.exception)
    json_check = _failback(tmp_path, "--source-hms-uri", OLD, "--db-map", "sales:sales_dr",
                           "--output", "json")
    body = json.loads(json_check.output)
    assert json_check.exit_code == 1 and body["refused"] and body["unreplicated_events"] == 1
    assert body["objects"][0]["target_db"] == "sales_dr" and body["other_events"] == [12]

    done = _failback(tmp_path, "--source-hms-uri", OLD, "--db-map", "sales:sales_dr",
                     "--discard-unreplicated", "--rebase")
    assert done.exit_code == 0, done.output
    assert old.dropped == ["sales"]  # the old source's name, not the new primary's
    [record] = _records(tmp_path)
    assert record["db_map"] == {"sales": "sales_dr"} and record["dropped"] == ["sales"]


def _metastore_db(path: Path, databases: dict[str, dict[str, str]], rows: list[NotificationRow],
                  schema: str = "hive") -> str:
    """A metastore database as ``--notification-db`` reads it: Hive's tables, or the bundled warehouse's."""
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute('CREATE TABLE "NOTIFICATION_LOG" ("EVENT_ID" INTEGER, "EVENT_TIME" INTEGER, '
                 '"EVENT_TYPE" TEXT, "DB_NAME" TEXT, "TBL_NAME" TEXT, "MESSAGE" TEXT, "MESSAGE_FORMAT" TEXT)')
    conn.executemany('INSERT INTO "NOTIFICATION_LOG" VALUES (?, ?, ?, ?, ?, ?, ?)',
                     [(r.event_id, 0, r.event_type, r.db_name, r.table_name, "{}", "json-0.2") for r in rows])
    if schema == "hive":
        conn.execute('CREATE TABLE "DBS" ("DB_ID" INTEGER, "NAME" TEXT)')
        conn.execute('CREATE TABLE "DATABASE_PARAMS" ("DB_ID" INTEGER, "PARAM_KEY" TEXT, "PARAM_VALUE" TEXT)')
        for i, (name, params) in enumerate(databases.items()):
            conn.execute('INSERT INTO "DBS" VALUES (?, ?)', (i, name))
            conn.executemany('INSERT INTO "DATABASE_PARAMS" VALUES (?, ?, ?)',
                             [(i, k, v) for k, v in params.items()])
    elif schema == "warehouse":
        conn.execute('CREATE TABLE "WH_DATABASES" ("NAME" TEXT, "SNAPSHOT" TEXT)')
        conn.executemany('INSERT INTO "WH_DATABASES" VALUES (?, ?)',
                         [(n, json.dumps({"name": n, "parameters": p})) for n, p in databases.items()])
    conn.commit()
    conn.close()
    return str(path)


@pytest.mark.parametrize("schema", ["hive", "warehouse"])
def test_the_notification_db_route_checks_the_metastore_too(tmp_path: Path, schema: str) -> None:
    new = MemoryCatalog()
    state = tmp_path / "state"
    _failed_over(state, new, "sales")
    marked = {"sales": dict(new.get_database("sales").parameters)}  # type: ignore[union-attr]
    wrong = _metastore_db(tmp_path / "new.db", marked, [row(41, "CREATE_TABLE", "sales", "t")], schema)
    refused = _failback(state, "--notification-db", wrong, "--discard-unreplicated")
    assert refused.exit_code != 0 and FAILOVER_CUT_PARAM in str(refused.exception)
    assert not (state / "failback.json").exists()

    old = _metastore_db(tmp_path / "old.db", {"sales": {}}, [row(11, "INSERT", "sales", "orders")], schema)
    listed = _failback(state, "--notification-db", old)
    assert listed.exit_code == 1 and "sales.orders: events 11" in str(listed.exception)


def test_a_notification_db_without_database_tables_is_read_with_a_warning(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _failed_over(state, MemoryCatalog(), "sales")
    log_only = _metastore_db(tmp_path / "log.db", {}, [row(11, "INSERT", "sales", "orders")], schema="none")
    result = _failback(state, "--notification-db", log_only, "--discard-unreplicated")
    assert result.exit_code == 0, result.output
    assert "not checked whether it is the old source" in result.output
    assert _records(state)[0]["unreplicated_events"] == 1


def test_a_failover_record_of_an_older_release_still_knows_its_marks() -> None:
    """Records written before ``source_ids`` existed: the failover's time identifies its marks."""
    from streamer.target.dr.failback import WrongMetastoreError, check_old_source
    from streamer.target.dr.failover import FailoverRecord

    record = FailoverRecord("done", "2024-05-01T10:00:00+00:00", "t1", CUT, ("sales",))
    new = {"sales": {REPL_SOURCE_PARAM: "prod", FAILOVER_CUT_PARAM: "10",
                     "repl.failover.time": "2024-05-01T10:00:00+00:00"}}
    with pytest.raises(WrongMetastoreError, match=r"'sales' carries repl\.failover\.cut=10"):
        check_old_source(new, record)
    check_old_source({"sales": {}, "hr": {"owner": "x"}}, record)  # the old source's own databases
