"""A record's names never forge what the target writes, and its state dir files are never followed.

Found by the second security review: a no-op event whose envelope database held a tab and newlines
forged lines in the progress journal; after a crash mid-batch the restart stamped this source's
marks on a foreign database. Names are now checked with the envelope (``codec.check_names``), the
journal is JSON lines, a marker never goes on a database this source does not own, and the journal
and the state dir lock are never opened through a symlink.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from streamer.errors import InvalidNameError
from streamer.events.codec import check_envelope, tracked_db
from streamer.events.model import CommitCompactionPayload, DatabaseSnapshot, Event, EventType, OpenTxnPayload
from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM
from streamer.target.apply import transactions
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.journal import JOURNAL_FILE, ProgressJournal
from streamer.target.apply.plan import plan
from streamer.target.state.lock import LOCK_FILE, StateLockTimeout, state_lock
from streamer.target.state.state_file import STATE_FILE
from tests.unit.target import builders as b
from tests.unit.target.apply.test_apply import Env, make_env

FORGED = "a\tb\nforeign\t999999"


@pytest.mark.parametrize(
    ("db", "table", "why"),
    [
        (FORGED, None, "control character '\\t'"),
        ("a\x00", None, "control character '\\x00'"),
        ("a\x85", None, "control character '\\x85'"),
        ("d" * 129, None, "129 characters long, over Hive's 128"),
        ("a", "t\n", "control character '\\n'"),
        ("a", "t" * 257, "257 characters long, over Hive's 256"),
    ],
)
def test_names_no_metastore_holds_are_refused_with_the_envelope(db: str, table: str | None, why: str) -> None:
    event = b.create_db(7, db) if table is None else b.create_table(7, b.table(db, table))
    with pytest.raises(InvalidNameError, match=re.escape(why)) as raised:
        check_envelope(event)
    assert raised.value.event_id == 7


def test_names_hive_holds_pass() -> None:
    check_envelope(b.create_table(7, b.table("d" * 128, "t" * 256)))
    check_envelope(b.create_db(8, "sales_eu-2"))
    check_envelope(b.create_db(9, "données"))  # not ASCII, no control character


def test_a_hostile_name_halts_before_the_journal_or_any_marker(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    env.applier.markers.per_batch = True
    assert env.run([b.create_db(1, "a")]) == [1]
    assert env.run([b.create_db(2, FORGED)]) == []
    halted = env.state.halts()
    key = tracked_db(FORGED)  # the halt's key: the name itself would forge lines too
    assert list(halted) == [key] and "control character" in halted[key].cause
    assert ProgressJournal(env.state.dir).read() == {}
    assert set(env.catalog.databases) == {"a"}


def test_the_journal_writes_one_json_line_per_step_whatever_the_name(tmp_path: Path) -> None:
    journal = ProgressJournal(tmp_path)
    journal.record(FORGED, 7)
    journal.record("b", 8)
    lines = (tmp_path / JOURNAL_FILE).read_text().split("\n")
    assert lines[-1] == "" and [json.loads(line) for line in lines[:-1]] == [[FORGED, 7], ["b", 8]]
    assert ProgressJournal(tmp_path).read() == {FORGED: 7, "b": 8}  # never {"foreign": 999999}


def test_a_journal_an_older_version_wrote_is_read(tmp_path: Path) -> None:
    (tmp_path / JOURNAL_FILE).write_text("a\t3\nb\t4\na\t5\nc\t6")  # c's line is torn: no newline
    assert ProgressJournal(tmp_path).read() == {"a": 5, "b": 4}


def _planted(tmp_path: Path, name: str) -> tuple[Path, Path]:
    state, victim = tmp_path / "state", tmp_path / "victim"
    state.mkdir()
    victim.write_text("precious")
    (state / name).symlink_to(victim)
    return state, victim


def test_the_journal_never_follows_a_symlink_planted_in_the_state_dir(tmp_path: Path) -> None:
    state, victim = _planted(tmp_path, JOURNAL_FILE)
    journal = ProgressJournal(state)
    with pytest.raises(OSError, match="symlink"):
        journal.record("a", 1)
    with pytest.raises(OSError, match="symlink"):
        journal.clear()
    with pytest.raises(OSError, match="symlink"):
        journal.read()
    assert victim.read_text() == "precious"


def test_the_state_lock_never_follows_a_symlink_planted_in_the_state_dir(tmp_path: Path) -> None:
    state, victim = _planted(tmp_path, LOCK_FILE)
    with pytest.raises(StateLockTimeout, match="symlink"), state_lock(state, wait=1):
        pass
    assert victim.read_text() == "precious"


def _foreign(env: Env, name: str, owner: str | None) -> dict[str, str]:
    params = {REPL_SOURCE_PARAM: owner, LAST_ID_PARAM: "5"} if owner else {}
    location = str(env.wh / f"{name}.db")
    env.catalog.create_database(DatabaseSnapshot(name, location=location, parameters=params))
    return dict(env.catalog.databases[name].parameters)


@pytest.mark.parametrize("owner", ["another-source", None])
def test_a_restart_never_stamps_a_journaled_id_on_a_database_this_source_does_not_own(
    tmp_path: Path, owner: str | None
) -> None:
    """A journal line naming a foreign database (an older version's forged line, or a file edited
    by hand): the restart keeps that progress in the state dir and leaves the database as it is."""
    env = make_env(tmp_path)
    before = _foreign(env, "foreign", owner)
    assert env.run([b.create_db(1, "a")]) == [1]
    journal = ProgressJournal(env.state.dir)
    journal.record("foreign", 999)
    journal.record("a", 3)
    copier = FileCopier(max_workers=2)
    restarted = Applier(env.catalog, copier, env.applier.paths, b.SOURCE_ID, state=env.state)
    progress = restarted.load_progress()
    assert env.catalog.databases["foreign"].parameters == before
    assert env.catalog.databases["a"].parameters[LAST_ID_PARAM] == "3"
    assert progress["a"] == 3


def _open(event_id: int, ids: range) -> Event:
    return b.event(event_id, EventType.OPEN_TXN, OpenTxnPayload(list(ids)))


def test_one_open_txn_event_opens_a_bounded_number_of_transactions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An 800 KB OPEN_TXN of 200,000 ids would grow the shared visibility file that every later
    transaction event of every source reads: one event opens at most ``MAX_TXNS_PER_EVENT`` (10,000;
    50 here, to stay fast)."""
    assert transactions.MAX_TXNS_PER_EVENT == 10_000
    monkeypatch.setattr(transactions, "MAX_TXNS_PER_EVENT", 50)
    env = make_env(tmp_path)
    assert env.run([_open(1, range(1, 51))]) == [1]
    assert env.run([_open(2, range(100, 151))]) == []
    (halt,) = env.state.halts().values()
    assert halt.event_id == 2 and "OPEN_TXN opens 51 transactions" in halt.cause
    assert env.applier.acid.current().open_count() == 50


@pytest.mark.parametrize(
    ("db", "table"),
    [("x" * 200_000, None), (FORGED * 20_000, "t"), ("a", "t" * 200_000), ("a", "t\n" * 100_000)],
    ids=["long-db", "forging-db", "long-table", "forging-table"],
)
def test_a_refused_name_never_stays_in_the_state_file(tmp_path: Path, db: str, table: str | None) -> None:
    """Found by the hostile-event property (issue 38 item 14): the refusal of a name no metastore holds
    halted the database under that very name, and the halt's object named it too, so a multi-MiB
    envelope name on a no-op event stayed in ``target-state.json`` (and in a skip's progress, for
    ever after). The halt is kept under a bounded stand-in that later records of that name meet."""
    env = make_env(tmp_path)
    assert env.run([b.create_db(1, "a")]) == [1]
    noop = b.event(2, EventType.COMMIT_COMPACTION, CommitCompactionPayload(2), db, table)
    assert env.run([noop]) == []
    (halt,) = env.state.halts().values()
    assert halt.event_id == 2 and "no metastore holds such a name" in halt.cause, halt
    assert not any(map(_controls, (halt.db, halt.object or ""))), halt
    assert (env.state.dir / STATE_FILE).stat().st_size < 4096
    # a later record of that name is held behind the halt, and a skip keeps nothing of the name
    again = b.event(3, EventType.COMMIT_COMPACTION, CommitCompactionPayload(3), db, table)
    assert plan([again], env.applier.load_progress(), env.state.halts()).held == (3,)
    env.state.skip(halt.db, 2)
    assert (env.state.dir / STATE_FILE).stat().st_size < 4096
    assert env.run([again]) == [] and list(env.state.halts()) == [halt.db]


def _controls(text: str) -> bool:
    return any(c < " " or "\x7f" <= c <= "\x9f" for c in text)
