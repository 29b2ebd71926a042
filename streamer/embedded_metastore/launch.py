"""What an embedded metastore starts with: its configuration files and its classpath.

``prepare`` writes ``hive-site.xml`` (and ``core-site.xml`` for ``hadoop.*`` overrides) into the
conf dir and returns the jars the server needs besides PySpark's: the PostgreSQL driver, streamer's
compiled classes (notification listener, local filesystem). Settings are layered: the database and
warehouse (``site``), then the listener, the local filesystem and change management when asked
for, then the caller's overrides, which win.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from streamer.embedded_metastore import cm, javabuild, listener, localfs
from streamer.embedded_metastore.errors import MetastoreError
from streamer.embedded_metastore.site import (
    POSTGRES_JAR,
    POSTGRES_JAR_HINT,
    MetastoreSettings,
    render_site_xml,
    site_properties,
)

log = logging.getLogger(__name__)


def pyspark_jars_dir() -> Path:
    """The ``jars`` folder of the installed PySpark, which holds Hive 2.3 and its dependencies."""
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - pyspark is a hard dependency
        raise MetastoreError("pyspark is not installed: the metastore runs from its jars") from exc
    jars = Path(pyspark.__file__).parent / "jars"
    if not any(jars.glob("hive-metastore-*.jar")):
        raise MetastoreError(f"no hive-metastore jar under {jars}: this PySpark build lacks Hive")
    return jars


@dataclass(frozen=True)
class ServerOptions:
    """The choices ``EmbeddedMetastore`` was given about what the server runs with."""

    settings: MetastoreSettings
    site_overrides: Mapping[str, str] = field(default_factory=dict)
    notifications: bool = False
    streamer_local_fs: bool = True
    cmroot: Path | None = None


@dataclass(frozen=True)
class Classpath:
    """Where the server's classes and configuration are: conf dir first, then PySpark's jars, then ours."""

    conf_dir: Path
    jars_dir: Path
    extra_jars: tuple[Path, ...]


def local_fs_classes(jars_dir: Path, *, required_by: str | None = None) -> Path | None:
    """streamer's local filesystem (``localfs``), or None to run on Hadoop's (warned about).

    ``required_by`` names an option that cannot work on Hadoop's: then its absence is an error.
    """
    try:
        return javabuild.classes_dir(jars_dir, "the metastore's local filesystem")
    except MetastoreError as exc:
        if required_by is not None:
            raise MetastoreError(f"{required_by} needs streamer's local filesystem: {exc}") from exc
        log.warning("%s; the metastore uses Hadoop's local filesystem (a process per permission)", exc)
        return None


def server_properties(options: ServerOptions, *, local_fs: bool) -> dict[str, str]:
    """Every hive-site.xml property, the caller's overrides last."""
    props = site_properties(options.settings)
    if options.notifications:
        props.update(listener.site_properties())
    if local_fs:
        props.update(localfs.site_properties())
    if options.cmroot is not None:
        props.update(cm.site_properties(options.cmroot))
    return {**props, **options.site_overrides}


def _extra_jars(options: ServerOptions, jars_dir: Path) -> tuple[list[Path], bool]:
    """The jars besides PySpark's, and whether streamer's local filesystem is among them."""
    extra: list[Path] = []
    if options.settings.is_postgres:
        if not POSTGRES_JAR.exists():
            raise MetastoreError(f"{POSTGRES_JAR} is missing: {POSTGRES_JAR_HINT}")
        extra.append(POSTGRES_JAR)
    if options.notifications:
        extra.append(listener.listener_classes(jars_dir))
    if options.cmroot is not None and not options.streamer_local_fs:
        raise MetastoreError("a cmroot needs streamer's local filesystem (Hadoop's gives no file checksums, "
                             "and Hive's change manager keeps no file without one)")
    classes = None
    if options.streamer_local_fs:
        needed = "change management (cmroot)" if options.cmroot is not None else None
        classes = local_fs_classes(jars_dir, required_by=needed)
    if classes is not None and classes not in extra:
        extra.append(classes)
    return extra, classes is not None


def prepare(options: ServerOptions, conf_dir: Path) -> Classpath:
    """Write the configuration files into ``conf_dir`` (created) and gather the classpath."""
    jars_dir = pyspark_jars_dir()
    extra, local_fs = _extra_jars(options, jars_dir)
    conf_dir.mkdir(parents=True, exist_ok=True)
    site = conf_dir / "hive-site.xml"
    site.write_text(render_site_xml(server_properties(options, local_fs=local_fs)))
    site.chmod(0o600)  # may hold the database password
    core = {k: v for k, v in options.site_overrides.items() if k.startswith("hadoop.")}
    if core:
        (conf_dir / "core-site.xml").write_text(render_site_xml(core))
    return Classpath(conf_dir=conf_dir, jars_dir=jars_dir, extra_jars=tuple(extra))
