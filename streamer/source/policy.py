"""Replication policies in Hive's ``REPL DUMP`` syntax: which databases and tables an agent publishes,
and which events pass (``accepts``, ``select``).

The grammar and the rules for each kind of event: ``docs/design/source.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from streamer.events.model import (
    AbortTxnPayload,
    AlterTablePayload,
    CommitTxnPayload,
    Event,
    EventType,
)
from streamer.source.errors import PolicyParseError

_DB_LEVEL = frozenset({
    EventType.CREATE_DATABASE,
    EventType.ALTER_DATABASE,
    EventType.DROP_DATABASE,
    EventType.CREATE_FUNCTION,
    EventType.DROP_FUNCTION,
})
_TXN = frozenset({EventType.OPEN_TXN, EventType.COMMIT_TXN, EventType.ABORT_TXN})
_NAME_STOP = frozenset(".[]'\"`, \t\r\n")


@dataclass(frozen=True)
class Policy:
    """One parsed policy. ``include is None`` means every table; an empty tuple means none."""

    text: str
    db_pattern: re.Pattern[str] | None
    include: tuple[re.Pattern[str], ...] | None = None
    exclude: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> Policy:
        return _Parser(text).policy()

    def includes_db(self, db: str) -> bool:
        return self.db_pattern is None or self.db_pattern.fullmatch(db) is not None

    def includes_table(self, db: str, table: str) -> bool:
        if not self.includes_db(db):
            return False
        if self.include is not None and not any(p.fullmatch(table) for p in self.include):
            return False
        return not any(p.fullmatch(table) for p in self.exclude)

    def accepts(self, event: Event) -> bool:
        return accepts(self, event)

    def select(self, event: Event) -> Event | None:
        return select(self, event)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class PolicySet:
    """Several policies of one agent: an object is in scope if any policy includes it."""

    policies: tuple[Policy, ...]

    @classmethod
    def parse(cls, texts: Iterable[str]) -> PolicySet:
        policies = tuple(Policy.parse(t) for t in texts)
        if not policies:
            policies = (Policy.parse("*"),)
        return cls(policies)

    def includes_db(self, db: str) -> bool:
        return any(p.includes_db(db) for p in self.policies)

    def includes_table(self, db: str, table: str) -> bool:
        return any(p.includes_table(db, table) for p in self.policies)

    def accepts(self, event: Event) -> bool:
        return accepts(self, event)

    def select(self, event: Event) -> Event | None:
        return select(self, event)

    def __str__(self) -> str:
        return ", ".join(p.text for p in self.policies)


class Scope(Protocol):
    def includes_db(self, db: str) -> bool: ...

    def includes_table(self, db: str, table: str) -> bool: ...


def accepts(scope: Scope, event: Event) -> bool:
    """Whether ``event`` must be published under ``scope`` (rules in the module docstring)."""
    kind = event.event_type
    payload = event.payload
    if kind is EventType.PROGRESS:
        return True
    if kind in _TXN:
        dbs = [event.db] if event.db else []
        if isinstance(payload, AbortTxnPayload):
            dbs += payload.databases
        return not dbs or any(scope.includes_db(db) for db in dbs)
    if isinstance(payload, AlterTablePayload) and payload.is_rename:
        before, after = payload.before, payload.after
        return scope.includes_table(before.db, before.name) or scope.includes_table(after.db, after.name)
    db, table = _object_of(event)
    if db is None:
        return True
    if kind in _DB_LEVEL or table is None:
        return scope.includes_db(db)
    return scope.includes_table(db, table)


def select(scope: Scope, event: Event) -> Event | None:
    """``event`` as published under ``scope``: ``None`` if filtered, COMMIT_TXN trimmed to its scope."""
    if not accepts(scope, event):
        return None
    payload = event.payload
    if isinstance(payload, CommitTxnPayload) and payload.writes:
        kept = [w for w in payload.writes if scope.includes_table(w.db, w.table)]
        if len(kept) != len(payload.writes):
            return replace(event, payload=replace(payload, writes=kept))
    return event


def _object_of(event: Event) -> tuple[str | None, str | None]:
    """The (db, table) an event is about: the row's names, else the payload's (3.1 blanks them)."""
    db = event.db or _text(getattr(event.payload, "db", None))
    table = event.table or _text(getattr(event.payload, "table", None))
    if table is None:
        snapshot = getattr(event.payload, "table", None)
        table = _text(getattr(snapshot, "name", None))
        db = db or _text(getattr(snapshot, "db", None))
    return db, table


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


class _Parser:
    """Recursive descent over one policy string; every error names a position and what was expected.

    Grammar::

        policy  := db [ '.' list [ '.' list ] ]
        db      := '*' | name | '`' anything but '`' '`'
        list    := '[' [ quoted { ',' quoted } ] ']'
        quoted  := "'" regex "'" | '"' regex '"'
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def policy(self) -> Policy:
        self._ws()
        db_pattern = self._db()
        lists: list[tuple[re.Pattern[str], ...]] = []
        self._ws()
        while len(lists) < 2 and self._peek() == ".":
            self.pos += 1
            self._ws()
            lists.append(self._list())
            self._ws()
        if self.pos < len(self.text):
            self._fail("'.' or end of policy" if len(lists) < 2 else "end of policy")
        include = lists[0] if lists else None
        exclude = lists[1] if len(lists) > 1 else ()
        return Policy(self.text.strip(), db_pattern, include, exclude)

    def _db(self) -> re.Pattern[str] | None:
        start = self.pos
        if self._peek() == "`":
            end = self.text.find("`", start + 1)
            if end < 0:
                self.pos = len(self.text)
                self._fail("closing '`'")
            name = self.text[start + 1 : end]
            self.pos = end + 1
        else:
            while self.pos < len(self.text) and self.text[self.pos] not in _NAME_STOP:
                self.pos += 1
            name = self.text[start : self.pos]
        if not name:
            self.pos = start
            self._fail("database name or '*'")
        if name == "*":
            return None
        return self._compile(name, start)

    def _list(self) -> tuple[re.Pattern[str], ...]:
        self._expect("[")
        patterns: list[re.Pattern[str]] = []
        self._ws()
        if self._peek() == "]":
            self.pos += 1
            return ()
        while True:
            self._ws()
            patterns.append(self._quoted("quoted regex or ']'" if not patterns else None))
            self._ws()
            if self._peek() == ",":
                self.pos += 1
                continue
            self._expect("]", "',' or ']'")
            return tuple(patterns)

    def _quoted(self, expected: str | None = None) -> re.Pattern[str]:
        start = self.pos
        quote = self._peek()
        if quote not in ("'", '"'):
            self._fail(expected or "quoted regex ('...' or \"...\")")
        chars: list[str] = []
        self.pos += 1
        while True:
            if self.pos >= len(self.text):
                self._fail(f"closing {quote}")
            char = self.text[self.pos]
            if char == "\\" and self.text[self.pos + 1 : self.pos + 2] == quote:
                chars.append(quote)
                self.pos += 2
                continue
            self.pos += 1
            if char == quote:
                break
            chars.append(char)
        regex = "".join(chars)
        if not regex:
            self.pos = start
            self._fail("non-empty regex")
        return self._compile(regex, start + 1)

    def _compile(self, regex: str, at: int) -> re.Pattern[str]:
        try:
            return re.compile(regex, re.IGNORECASE)
        except re.error as exc:
            raise PolicyParseError(self.text, at + (exc.pos or 0), "a valid regular expression",
                                   f"{regex} ({exc.msg})") from exc

    def _expect(self, token: str, description: str | None = None) -> None:
        if self._peek() != token:
            self._fail(description or repr(token))
        self.pos += 1

    def _peek(self) -> str | None:
        return self.text[self.pos] if self.pos < len(self.text) else None

    def _ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def _fail(self, expected: str) -> None:
        found = self.text[self.pos] if self.pos < len(self.text) else None
        raise PolicyParseError(self.text, self.pos, expected, found)
