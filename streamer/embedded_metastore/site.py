"""The ``hive-site.xml`` an embedded metastore runs with, built from typed settings.

Pure code: what the server needs to know (JDO connection, schema auto-creation, warehouse dir) is
decided here, so it can be checked without starting Java.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

DERBY_DRIVER = "org.apache.derby.jdbc.EmbeddedDriver"
POSTGRES_DRIVER = "org.postgresql.Driver"
POSTGRES_JAR = Path("/usr/share/java/postgresql.jar")
POSTGRES_JAR_HINT = "install the PostgreSQL JDBC driver with `apt-get install libpostgresql-jdbc-java`"


@dataclass(frozen=True)
class MetastoreSettings:
    """What distinguishes one embedded metastore from another."""

    warehouse_dir: Path
    jdbc_url: str
    jdbc_user: str | None = None
    jdbc_password: str | None = None

    @property
    def is_postgres(self) -> bool:
        return self.jdbc_url.startswith("jdbc:postgresql:")

    @property
    def driver(self) -> str:
        return POSTGRES_DRIVER if self.is_postgres else DERBY_DRIVER


def derby_url(work_dir: Path) -> str:
    """Derby database in ``work_dir``; created on first start, reused after."""
    return f"jdbc:derby:;databaseName={work_dir / 'metastore_db'};create=true"


def site_properties(settings: MetastoreSettings) -> dict[str, str]:
    """Hive properties for the server; the schema is created by DataNucleus, unverified."""
    props = {
        "javax.jdo.option.ConnectionURL": settings.jdbc_url,
        "javax.jdo.option.ConnectionDriverName": settings.driver,
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "hive.metastore.warehouse.dir": settings.warehouse_dir.as_uri(),
        # Hive 2.3 defaults to BoneCP, which PySpark does not ship; HikariCP it does. The
        # transaction handler (used by drop-database and ACID calls) fails without this.
        "datanucleus.connectionPoolingType": "HikariCP",
        # each of the server's pools (DataNucleus's two, the transaction handler's) at most this many:
        # Hive's default of 10 makes ~47 connections per metastore, and a few metastores on one
        # PostgreSQL (max_connections 100 by default) exhaust it; the embedded server's load needs few
        "datanucleus.connectionPool.maxPoolSize": "4",
        # Spark and our client both talk plain (unsecured) binary Thrift.
        "hive.metastore.sasl.enabled": "false",
        "hive.metastore.event.db.notification.api.auth": "false",
    }
    if settings.jdbc_user is not None:
        props["javax.jdo.option.ConnectionUserName"] = settings.jdbc_user
    if settings.jdbc_password is not None:
        props["javax.jdo.option.ConnectionPassword"] = settings.jdbc_password
    return props


def render_site_xml(props: dict[str, str]) -> str:
    """Hadoop configuration XML with every value escaped."""
    lines = ['<?xml version="1.0"?>', "<configuration>"]
    for name, value in props.items():
        lines.append(f"  <property><name>{escape(name)}</name><value>{escape(value)}</value></property>")
    lines.append("</configuration>")
    return "\n".join(lines) + "\n"
