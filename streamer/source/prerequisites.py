"""What a source metastore must be configured with for replication to see every change.

Without a notification-log listener among its listeners the metastore writes no notification log at
all; without ``hive.metastore.dml.events`` inserts publish no event (their files never reach a
target); without change management (``hive.repl.cm.enabled``) a file rewritten or dropped before a
target copies it is lost, and the target halts. Over Thrift the agent can ask the metastore
(``get_config_value``) and warn at start-up, naming the setting and what to set; reading the
metastore's database it cannot, and says so.

The names are Hive's own (``HiveConf.ConfVars`` of 2.3.10, the same on 3 and 4):
``hive.metastore.transactional.event.listeners`` (listeners that run inside the change's metastore
transaction; 2.3 has it too) and ``hive.metastore.event.listeners`` (after the change; Hive 2's usual
place). A listener writes the log when its class is Hive's ``DbNotificationListener`` (any package:
vendors relocate it), a subclass named after it (``...DbNotificationListener``, the convention for
extending it), or streamer's own (``streamer hms run --notifications``). HCatalog's
``NotificationListener`` sends JMS messages and writes no log: it does not count.

``prerequisite_warnings`` judges the values (pure); ``check_prerequisites`` reads and logs them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)

TRANSACTIONAL_LISTENERS = "hive.metastore.transactional.event.listeners"
EVENT_LISTENERS = "hive.metastore.event.listeners"
DML_EVENTS = "hive.metastore.dml.events"
CM_ENABLED = "hive.repl.cm.enabled"
CM_ROOT = "hive.repl.cmrootdir"
SETTINGS: tuple[str, ...] = (TRANSACTIONAL_LISTENERS, EVENT_LISTENERS, DML_EVENTS, CM_ENABLED, CM_ROOT)
LISTENER = "DbNotificationListener"
LISTENER_CLASS = "org.apache.hive.hcatalog.listener.DbNotificationListener"
# streamer's listener for the embedded metastore (streamer/embedded_metastore/java, Java package streamer.hms)
STREAMER_LISTENER_CLASS = "streamer.hms.StreamerNotificationListener"


def logs_notifications(class_name: str) -> bool:
    """Whether a listener class writes ``NOTIFICATION_LOG``: Hive's, one named after it, or streamer's."""
    name = class_name.strip()
    return name == STREAMER_LISTENER_CLASS or name.rsplit(".", 1)[-1].endswith(LISTENER)


def _has_listener(value: str | None) -> bool:
    return any(logs_notifications(name) for name in (value or "").split(","))


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def prerequisite_warnings(
    values: Mapping[str, str], unreadable: Mapping[str, str] | None = None, *, cmroot: str | None = None
) -> list[str]:
    """One warning per prerequisite that is off, naming the setting and the value it needs.

    ``values`` are the settings as the metastore reports them; ``unreadable`` maps a setting that
    could not be read to why, and is a warning too (it has to be checked by hand). ``cmroot`` is
    the agent's ``--cmroot``: a different change-manager root than the metastore's is warned about.
    """
    unreadable = unreadable or {}
    warnings = [f"cannot read {name} from the metastore ({cause}); check it by hand"
                for name, cause in unreadable.items()]
    listeners = [values.get(TRANSACTIONAL_LISTENERS), values.get(EVENT_LISTENERS)]
    listeners_known = TRANSACTIONAL_LISTENERS not in unreadable or EVENT_LISTENERS not in unreadable
    if listeners_known and not any(_has_listener(v) for v in listeners):
        warnings.append(
            f"{TRANSACTIONAL_LISTENERS}={values.get(TRANSACTIONAL_LISTENERS, '')!r} and "
            f"{EVENT_LISTENERS}={values.get(EVENT_LISTENERS, '')!r} name no listener that writes the "
            f"notification log, so nothing will be replicated: add {LISTENER_CLASS} to "
            f"{TRANSACTIONAL_LISTENERS} (comma-separated, after any listeners already there; jar "
            f"hive-hcatalog-server-extensions) in the metastore's hive-site.xml and restart it"
        )
    if DML_EVENTS not in unreadable and not _true(values.get(DML_EVENTS)):
        warnings.append(f"{DML_EVENTS} is {values.get(DML_EVENTS)!r}, not 'true': inserts into existing "
                        "tables and partitions publish no event, so their files never reach a target")
    if CM_ENABLED not in unreadable and not _true(values.get(CM_ENABLED)):
        warnings.append(f"{CM_ENABLED} is {values.get(CM_ENABLED)!r}, not 'true': a file rewritten or "
                        "dropped before a target copies it cannot be recovered and halts that target's "
                        "database")
    elif cmroot and values.get(CM_ROOT) and values[CM_ROOT].rstrip("/") != cmroot.rstrip("/"):
        warnings.append(f"--cmroot {cmroot} differs from the metastore's {CM_ROOT}={values[CM_ROOT]}: "
                        "change-manager copies of Hive 2.3 file references will be looked for in the "
                        "wrong place")
    return warnings


def read_settings(
    get_config_value: Callable[[str, str], str], names: tuple[str, ...]
) -> tuple[dict[str, str], dict[str, str]]:
    """(values, unreadable: name -> why) of ``names`` as the metastore reports them; after a call
    that gets no answer at all the rest are not asked (it would only wait longer)."""
    values: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    failed: str | None = None
    for name in names:
        if failed is not None:
            unreadable[name] = failed
            continue
        try:
            values[name] = str(get_config_value(name, ""))
        except Exception as exc:  # a refusal of this name, or no answer at all
            cause = f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"
            unreadable[name] = cause
            if type(exc).__name__ != "ConfigValSecurityException":
                failed = cause
    return values, unreadable


def check_prerequisites(
    get_config_value: Callable[[str, str], str], *, cmroot: str | None = None
) -> list[str]:
    """Read the settings through ``get_config_value(name, default)`` (the metastore's Thrift call),
    log a warning for each prerequisite that is off, and return the warnings."""
    values, unreadable = read_settings(get_config_value, SETTINGS)
    warnings = prerequisite_warnings(values, unreadable, cmroot=cmroot)
    for warning in warnings:
        log.warning("source prerequisite: %s", warning)
    if not warnings:
        log.info("source prerequisites met: %s", ", ".join(f"{n}={values[n]}" for n in SETTINGS if values[n]))
    return warnings


def cannot_check(notification_db: str) -> None:
    """Reading the metastore's database directly, the agent cannot see the server's settings (the
    bundled warehouse, a sqlite file, writes its log itself and needs none of them)."""
    scheme = notification_db.split("://", 1)[0].lower() if "://" in notification_db else ""
    if scheme in ("", "sqlite", "file"):
        return
    log.info("source prerequisites (%s including %s, %s=true, %s=true) cannot be checked when reading "
             "the metastore's database; make sure they are set (or use --hms-uri, which checks them)",
             TRANSACTIONAL_LISTENERS, LISTENER_CLASS, DML_EVENTS, CM_ENABLED)


def reverse_stream_warning(values: Mapping[str, str], unreadable: Mapping[str, str], uri: str) -> str | None:
    """What a failover says about its new primary's log (None when it writes one): without a
    listener, no reverse stream can carry the new primary's writes back."""
    listeners = (TRANSACTIONAL_LISTENERS, EVENT_LISTENERS)
    if any(_has_listener(values.get(name)) for name in listeners):
        return None
    if any(name in unreadable for name in listeners):
        causes = "; ".join(f"{n}: {unreadable[n]}" for n in listeners if n in unreadable)
        return (f"could not check whether the new primary's metastore {uri} writes a notification log "
                f"({causes}); without one no reverse stream (`streamer source run`) can carry its "
                "writes back")
    return (
        f"the new primary's metastore {uri} writes no notification log (no {LISTENER} in "
        f"{TRANSACTIONAL_LISTENERS} or {EVENT_LISTENERS}): no reverse stream can carry the writes it "
        "takes back to the old source; "
        f"set {TRANSACTIONAL_LISTENERS}={LISTENER_CLASS} and restart it before writers start "
        "(docs/failover.md)"
    )


def check_reverse_stream(get_config_value: Callable[[str, str], str], uri: str) -> str | None:
    """``reverse_stream_warning`` for the metastore behind ``get_config_value``."""
    values, unreadable = read_settings(get_config_value, (TRANSACTIONAL_LISTENERS, EVENT_LISTENERS))
    return reverse_stream_warning(values, unreadable, uri)
