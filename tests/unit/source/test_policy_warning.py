"""A policy that matches none of the source's databases is reported at start-up, not discovered later."""

from __future__ import annotations

import logging

import pytest

from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.policy import PolicySet
from streamer.source.reader import SqlNotificationReader
from streamer.warehouse.warehouse import Warehouse


def _agent(wh: Warehouse, policies: list[str]) -> SourceAgent:
    config = AgentConfig(source_id="s", kafka={"bootstrap.servers": "127.0.0.1:1"})
    return SourceAgent(config, SqlNotificationReader(wh.store.url), PolicySet.parse(policies))


def test_sql_reader_lists_the_databases_of_the_log(sqlite_warehouse: Warehouse) -> None:
    sqlite_warehouse.create_database("Sales")
    sqlite_warehouse.create_database("hr")
    reader = SqlNotificationReader(sqlite_warehouse.store.url)
    try:
        assert reader.databases() == {"sales", "hr"}
    finally:
        reader.close()


@pytest.mark.parametrize(("policies", "warned"), [(["nope"], True), (["sales"], False), ([], False)])
def test_policy_matching_no_database_is_warned_about(
    sqlite_warehouse: Warehouse, caplog: pytest.LogCaptureFixture, policies: list[str], warned: bool
) -> None:
    sqlite_warehouse.create_database("sales")
    agent = _agent(sqlite_warehouse, policies)
    with caplog.at_level(logging.WARNING, logger="streamer.source.agent"):
        agent._warn_if_policy_matches_nothing()
    assert ("matches none of the source's databases" in caplog.text) is warned
