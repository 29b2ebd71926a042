"""The metastore's tables on PostgreSQL, created up front with DataNucleus' SchemaTool.

With ``autoCreateAll`` alone DataNucleus creates tables lazily, inside whichever request first needs
them; on PostgreSQL that DDL waits for locks the request itself holds and the call hangs (seen with
drop_database). Creating missing tables is idempotent, so it runs before every start.

Hive's transaction tables (``TXNS``, ``NEXT_TXN_ID``, ``HIVE_LOCKS``, ...) are no JDO tables: Hive
creates them with its schema scripts (``hive-txn-schema-2.3.0.*.sql``), without which ``open_txns``,
``commit_txn``, ``abort_txn`` and ``get_open_txns`` fail. ``create_txn_tables`` creates the ones
``TxnHandler`` uses, with the columns those scripts give them, through Derby's ``ij`` (a JDBC
script runner PySpark ships), idempotently.
"""

from __future__ import annotations

import logging
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path

from streamer.embedded_metastore.process import JavaProcess, java_command
from streamer.embedded_metastore.site import MetastoreSettings, site_properties

log = logging.getLogger(__name__)

SCHEMA_TOOL = "org.datanucleus.store.schema.SchemaTool"
IJ = "org.apache.derby.tools.ij"

# Hive 2.3's transaction tables as its schema scripts create them (names unquoted: TxnHandler's
# queries do not quote them either, so PostgreSQL folds both to lower case).
TXN_TABLES: dict[str, tuple[str, ...]] = {
    "TXNS": (
        "TXN_ID bigint PRIMARY KEY", "TXN_STATE char(1) NOT NULL", "TXN_STARTED bigint NOT NULL",
        "TXN_LAST_HEARTBEAT bigint NOT NULL", "TXN_USER varchar(128) NOT NULL",
        "TXN_HOST varchar(128) NOT NULL", "TXN_AGENT_INFO varchar(128)", "TXN_META_INFO varchar(128)",
        "TXN_HEARTBEAT_COUNT integer",
    ),
    "TXN_COMPONENTS": (
        "TC_TXNID bigint REFERENCES TXNS (TXN_ID)", "TC_DATABASE varchar(128) NOT NULL",
        "TC_TABLE varchar(128)", "TC_PARTITION varchar(767)", "TC_OPERATION_TYPE char(1) NOT NULL",
    ),
    "COMPLETED_TXN_COMPONENTS": (
        "CTC_TXNID bigint", "CTC_DATABASE varchar(128) NOT NULL", "CTC_TABLE varchar(256)",
        "CTC_PARTITION varchar(767)",
    ),
    "NEXT_TXN_ID": (
        "NTXN_NEXT bigint NOT NULL",
    ),
    "HIVE_LOCKS": (
        "HL_LOCK_EXT_ID bigint NOT NULL", "HL_LOCK_INT_ID bigint NOT NULL", "HL_TXNID bigint",
        "HL_DB varchar(128) NOT NULL", "HL_TABLE varchar(128)", "HL_PARTITION varchar(767)",
        "HL_LOCK_STATE char(1) NOT NULL", "HL_LOCK_TYPE char(1) NOT NULL",
        "HL_LAST_HEARTBEAT bigint NOT NULL", "HL_ACQUIRED_AT bigint", "HL_USER varchar(128) NOT NULL",
        "HL_HOST varchar(128) NOT NULL", "HL_HEARTBEAT_COUNT integer", "HL_AGENT_INFO varchar(128)",
        "HL_BLOCKEDBY_EXT_ID bigint", "HL_BLOCKEDBY_INT_ID bigint",
        "PRIMARY KEY (HL_LOCK_EXT_ID, HL_LOCK_INT_ID)",
    ),
    "NEXT_LOCK_ID": (
        "NL_NEXT bigint NOT NULL",
    ),
    "COMPACTION_QUEUE": (
        "CQ_ID bigint PRIMARY KEY", "CQ_DATABASE varchar(128) NOT NULL", "CQ_TABLE varchar(128) NOT NULL",
        "CQ_PARTITION varchar(767)", "CQ_STATE char(1) NOT NULL", "CQ_TYPE char(1) NOT NULL",
        "CQ_TBLPROPERTIES varchar(2048)", "CQ_WORKER_ID varchar(128)", "CQ_START bigint",
        "CQ_RUN_AS varchar(128)", "CQ_HIGHEST_TXN_ID bigint", "CQ_META_INFO {binary}",
        "CQ_HADOOP_JOB_ID varchar(32)",
    ),
    "NEXT_COMPACTION_QUEUE_ID": (
        "NCQ_NEXT bigint NOT NULL",
    ),
    "COMPLETED_COMPACTIONS": (
        "CC_ID bigint PRIMARY KEY", "CC_DATABASE varchar(128) NOT NULL", "CC_TABLE varchar(128) NOT NULL",
        "CC_PARTITION varchar(767)", "CC_STATE char(1) NOT NULL", "CC_TYPE char(1) NOT NULL",
        "CC_TBLPROPERTIES varchar(2048)", "CC_WORKER_ID varchar(128)", "CC_START bigint", "CC_END bigint",
        "CC_RUN_AS varchar(128)", "CC_HIGHEST_TXN_ID bigint", "CC_META_INFO {binary}",
        "CC_HADOOP_JOB_ID varchar(32)",
    ),
    "AUX_TABLE": (
        "MT_KEY1 varchar(128) NOT NULL", "MT_KEY2 bigint NOT NULL", "MT_COMMENT varchar(255)",
        "PRIMARY KEY (MT_KEY1, MT_KEY2)",
    ),
    "WRITE_SET": (
        "WS_DATABASE varchar(128) NOT NULL", "WS_TABLE varchar(128) NOT NULL", "WS_PARTITION varchar(767)",
        "WS_TXNID bigint NOT NULL", "WS_COMMIT_ID bigint NOT NULL", "WS_OPERATION_TYPE char(1) NOT NULL",
    ),
}
SEQUENCES = {"NEXT_TXN_ID": "NTXN_NEXT", "NEXT_LOCK_ID": "NL_NEXT", "NEXT_COMPACTION_QUEUE_ID": "NCQ_NEXT"}


def schema_properties(settings: MetastoreSettings) -> dict[str, str]:
    """SchemaTool's properties: the JDO connection and Hive's identifier naming."""
    connection = site_properties(settings).items()
    props = {k: v for k, v in connection if k.startswith("javax.jdo.option.Connection")}
    props["datanucleus.identifierFactory"] = "datanucleus1"  # Hive's default naming
    props["datanucleus.rdbms.useLegacyNativeValueStrategy"] = "true"
    return props


def render_properties(props: dict[str, str]) -> str:
    """A Java ``.properties`` file (backslashes escaped)."""
    return "".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in props.items())


def create_schema(
    settings: MetastoreSettings,
    conf_dir: Path,
    jars_dir: Path,
    extra_jars: Sequence[Path],
    runner: JavaProcess,
    timeout: float,
) -> None:
    """Create every metastore table that is missing (``runner`` logs it and reports a failure)."""
    jar = next(jars_dir.glob("hive-metastore-*.jar"))
    with zipfile.ZipFile(jar) as zf:
        (conf_dir / "package.jdo").write_bytes(zf.read("package.jdo"))
    props_file = conf_dir / "schema.properties"
    props_file.write_text(render_properties(schema_properties(settings)))
    props_file.chmod(0o600)  # may hold the database password
    tool = [SCHEMA_TOOL, "-create", "-api", "JDO", "-props", str(props_file), str(conf_dir / "package.jdo")]
    cmd = java_command(conf_dir, jars_dir, 0, extra_jars, main=tool)
    log.info("creating the metastore schema in %s", settings.jdbc_url)
    runner.run(cmd, timeout, "schema creation")
    create_txn_tables(settings, conf_dir, jars_dir, extra_jars, runner, timeout)


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def txn_schema_script(settings: MetastoreSettings) -> str:
    """The ``ij`` script creating the transaction tables that are missing, and their one-row counters.

    PostgreSQL skips existing tables (``IF NOT EXISTS``); Derby has no such clause, so there a
    second run's CREATEs fail harmlessly (``ij`` goes on). Counters start at 1 only when empty.
    """
    postgres = settings.is_postgres
    connect = f"connect {_sql_string(settings.jdbc_url)}"
    if settings.jdbc_user is not None:
        connect += f" user {_sql_string(settings.jdbc_user)}"
        connect += f" password {_sql_string(settings.jdbc_password or '')}"
    lines = [connect + ";"]
    binary = "bytea" if postgres else "varchar(2048) for bit data"
    exists = "IF NOT EXISTS " if postgres else ""
    for name, columns in TXN_TABLES.items():
        lines.append(f"CREATE TABLE {exists}{name} ({', '.join(columns).format(binary=binary)});")
    lines.append(f"CREATE INDEX {exists}TC_TXNID_INDEX ON TXN_COMPONENTS (TC_TXNID);")
    lines.append(f"CREATE INDEX {exists}HL_TXNID_INDEX ON HIVE_LOCKS (HL_TXNID);")
    for table, column in SEQUENCES.items():
        lines.append(f"INSERT INTO {table} ({column}) SELECT * FROM (VALUES (1)) AS T (N) "
                     f"WHERE NOT EXISTS (SELECT 1 FROM {table});")
    lines.append("disconnect;")
    lines.append("exit;")
    return "\n".join(lines) + "\n"


def create_txn_tables(
    settings: MetastoreSettings,
    conf_dir: Path,
    jars_dir: Path,
    extra_jars: Sequence[Path],
    runner: JavaProcess,
    timeout: float,
) -> None:
    """Create Hive's transaction tables that are missing (before the server starts: Derby allows one
    JVM at a time). Only Derby's jars and the JDBC driver are on the classpath: a quick JVM."""
    script = conf_dir / "txn-schema.sql"
    script.write_text(txn_schema_script(settings))
    script.chmod(0o600)  # may hold the database password
    derby = sorted(jars_dir.glob("derby*.jar"))
    java_cmd = java_command(conf_dir, jars_dir, 0, extra_jars, main=[IJ, str(script)])
    classpath = os.pathsep.join([*(str(j) for j in derby), *(str(j) for j in extra_jars)])
    cp = java_cmd.index("-cp")
    java_cmd[cp + 1] = classpath
    log.info("creating Hive's transaction tables in %s", settings.jdbc_url)
    runner.run(java_cmd, timeout, "transaction tables creation")
