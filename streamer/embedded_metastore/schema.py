"""The metastore's tables on PostgreSQL, created up front with DataNucleus' SchemaTool.

With ``autoCreateAll`` alone DataNucleus creates tables lazily, inside whichever request first needs
them; on PostgreSQL that DDL waits for locks the request itself holds and the call hangs (seen with
drop_database). Creating missing tables is idempotent, so it runs before every start.
"""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Sequence
from pathlib import Path

from streamer.embedded_metastore.process import JavaProcess, java_command
from streamer.embedded_metastore.site import MetastoreSettings, site_properties

log = logging.getLogger(__name__)

SCHEMA_TOOL = "org.datanucleus.store.schema.SchemaTool"


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
