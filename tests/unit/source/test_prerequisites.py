"""Judging a source metastore's settings: each prerequisite that is off is named in a warning."""

from __future__ import annotations

import logging

import pytest

from streamer.source.prerequisites import (
    CM_ENABLED,
    CM_ROOT,
    DML_EVENTS,
    EVENT_LISTENERS,
    LISTENER_CLASS,
    STREAMER_LISTENER_CLASS,
    TRANSACTIONAL_LISTENERS,
    cannot_check,
    check_prerequisites,
    check_reverse_stream,
    prerequisite_warnings,
)

GOOD = {
    TRANSACTIONAL_LISTENERS: f"com.example.Audit, {LISTENER_CLASS}",
    EVENT_LISTENERS: "",
    DML_EVENTS: "true",
    CM_ENABLED: "TRUE",
    CM_ROOT: "hdfs://nn/cmroot",
}


def test_a_configured_metastore_gets_no_warning() -> None:
    assert prerequisite_warnings(GOOD, cmroot="hdfs://nn/cmroot/") == []
    # Hive 2's place for the listener counts as well
    older = {**GOOD, TRANSACTIONAL_LISTENERS: "", EVENT_LISTENERS: LISTENER_CLASS}
    assert prerequisite_warnings(older) == []


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({TRANSACTIONAL_LISTENERS: "com.example.DbNotificationListenerX"}, TRANSACTIONAL_LISTENERS),
        ({DML_EVENTS: "false"}, DML_EVENTS),
        ({DML_EVENTS: ""}, DML_EVENTS),
        ({CM_ENABLED: "false"}, CM_ENABLED),
    ],
)
def test_each_setting_that_is_off_is_named(changes: dict[str, str], named: str) -> None:
    (warning,) = prerequisite_warnings({**GOOD, **changes})
    assert warning.startswith(named)


def test_nothing_set_names_every_setting() -> None:
    warnings = prerequisite_warnings({})
    assert len(warnings) == 3
    assert LISTENER_CLASS in warnings[0] and DML_EVENTS in warnings[1] and CM_ENABLED in warnings[2]


def test_a_different_cmroot_is_warned_about() -> None:
    (warning,) = prerequisite_warnings(GOOD, cmroot="hdfs://other/cm")
    assert "--cmroot hdfs://other/cm" in warning and CM_ROOT in warning


def test_unreadable_settings_are_warnings_not_passes() -> None:
    refused = {name: "ConfigValSecurityException: cannot be accessed" for name in (DML_EVENTS, CM_ENABLED)}
    warnings = prerequisite_warnings({k: v for k, v in GOOD.items() if k not in refused}, refused)
    named = [w.split(" from")[0] for w in warnings]
    assert named == [f"cannot read {DML_EVENTS}", f"cannot read {CM_ENABLED}"]


class ConfigValSecurityException(Exception):
    pass


def test_check_reads_through_the_call_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    asked: list[str] = []

    def get(name: str, default: str) -> str:
        asked.append(name)
        if name == DML_EVENTS:
            raise ConfigValSecurityException("refused")
        return {**GOOD, CM_ENABLED: "false"}[name]

    with caplog.at_level(logging.INFO, logger="streamer.source.prerequisites"):
        warnings = check_prerequisites(get)
    assert len(asked) == 5  # a refused name does not stop the others
    assert [w.split(" ")[0:3] for w in warnings] == [
        ["cannot", "read", DML_EVENTS], [CM_ENABLED, "is", "'false',"]]
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING"]


def test_an_unreachable_metastore_is_asked_once() -> None:
    asked: list[str] = []

    def get(name: str, default: str) -> str:
        asked.append(name)
        raise ConnectionRefusedError("no metastore")

    warnings = check_prerequisites(get)
    assert len(asked) == 1 and len(warnings) == 5 and all("ConnectionRefusedError" in w for w in warnings)


def test_reading_a_metastore_database_says_the_settings_are_unchecked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="streamer.source.prerequisites"):
        cannot_check("warehouse.db")  # the bundled warehouse: nothing to say
        assert not caplog.records
        cannot_check("postgresql://hive@db/metastore")
    (record,) = caplog.records
    assert "cannot be checked" in record.getMessage() and DML_EVENTS in record.getMessage()


# --- which listeners write the notification log (issue 25, item 3) ------------------------------


def test_the_listener_keys_are_hives_own_names() -> None:
    """HiveConf 2.3.10 (and 3/4) name them so; ``hive.metastore.transactional.listeners`` is no setting."""
    assert TRANSACTIONAL_LISTENERS == "hive.metastore.transactional.event.listeners"
    assert EVENT_LISTENERS == "hive.metastore.event.listeners"
    assert DML_EVENTS == "hive.metastore.dml.events"


@pytest.mark.parametrize(
    "listeners",
    [
        LISTENER_CLASS,
        STREAMER_LISTENER_CLASS,  # `streamer hms run --notifications`
        f"com.example.Audit,{STREAMER_LISTENER_CLASS}",
        "com.example.hive.AuditingDbNotificationListener",  # a subclass named after its base
        f" {LISTENER_CLASS} ",
    ],
)
@pytest.mark.parametrize("key", [TRANSACTIONAL_LISTENERS, EVENT_LISTENERS])
def test_a_metastore_that_logs_is_not_warned_about(key: str, listeners: str) -> None:
    values = {**GOOD, TRANSACTIONAL_LISTENERS: "", EVENT_LISTENERS: "", key: listeners}
    assert prerequisite_warnings(values) == []


@pytest.mark.parametrize(
    "listeners",
    [
        "",
        "org.apache.hive.hcatalog.listener.NotificationListener",  # HCatalog's JMS one: no log
        "com.example.DbNotificationListenerX",
        "streamer.hms.StreamerNotificationListenerX",
    ],
)
def test_a_metastore_without_a_logging_listener_is_told_what_to_set(listeners: str) -> None:
    values = {**GOOD, TRANSACTIONAL_LISTENERS: listeners, EVENT_LISTENERS: ""}
    (warning,) = prerequisite_warnings(values)
    assert warning.startswith(TRANSACTIONAL_LISTENERS)
    assert f"add {LISTENER_CLASS} to {TRANSACTIONAL_LISTENERS}" in warning
    assert "hive-site.xml" in warning and "nothing will be replicated" in warning
    assert repr(listeners) in warning  # what the metastore has now


def test_the_listener_keys_are_the_ones_asked_for() -> None:
    asked: list[str] = []

    def get(name: str, default: str) -> str:
        asked.append(name)
        return {TRANSACTIONAL_LISTENERS: STREAMER_LISTENER_CLASS, EVENT_LISTENERS: "", DML_EVENTS: "true",
                CM_ENABLED: "true", CM_ROOT: "file:/cm"}.get(name, "")

    assert check_prerequisites(get) == []
    assert "hive.metastore.transactional.event.listeners" in asked
    assert "hive.metastore.transactional.listeners" not in asked


@pytest.mark.parametrize(("settings", "warned"), [
    ({TRANSACTIONAL_LISTENERS: LISTENER_CLASS}, None),
    ({EVENT_LISTENERS: f"x.Audit,{STREAMER_LISTENER_CLASS}"}, None),
    ({TRANSACTIONAL_LISTENERS: "org.apache.hive.hcatalog.listener.NotificationListener"},
     "writes no notification log"),
    ({}, "writes no notification log"),
])
def test_a_failover_onto_a_metastore_without_a_log_is_warned_about(
    settings: dict[str, str], warned: str | None
) -> None:
    """Issue 40 item 6: the new primary's listeners decide whether a reverse stream is possible."""
    warning = check_reverse_stream(lambda name, default: settings.get(name, default), "thrift://dr:9083")
    if warned is None:
        assert warning is None
    else:
        assert warning is not None and warned in warning and "thrift://dr:9083" in warning
        assert LISTENER_CLASS in warning


def test_a_new_primary_that_does_not_answer_is_unchecked_not_passed() -> None:
    def get(name: str, default: str) -> str:
        raise OSError("connection reset")

    warning = check_reverse_stream(get, "thrift://dr:9083")
    assert warning is not None and "could not check" in warning and "connection reset" in warning
