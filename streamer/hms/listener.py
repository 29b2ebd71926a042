"""streamer's notification listener for the embedded metastore: its settings and its build.

PySpark's jars hold Hive 2.3's metastore but not hive-hcatalog-server-extensions, where Hive's
``DbNotificationListener`` lives; without a listener nothing writes ``NOTIFICATION_LOG``.
``java/StreamerNotificationListener.java`` (in this package) is streamer's own listener, written
against the metastore's listener API; it is compiled with ``javac`` against PySpark's jars on first
use, into a cache dir keyed by the hash of its source and of the jars' names, and put on the
server's classpath. ``site_properties`` registers it as a *transactional* listener (each event is
stored in the metastore transaction of its change) and turns on INSERT events.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from streamer.hms.errors import MetastoreError

LISTENER_CLASS = "streamer.hms.StreamerNotificationListener"
SOURCE = Path(__file__).with_name("java") / "StreamerNotificationListener.java"
JDK_HINT = "install a JDK (e.g. `apt-get install openjdk-17-jdk-headless`; scripts/setup.sh does)"


def site_properties() -> dict[str, str]:
    """hive-site.xml properties that make the metastore log its changes for `get_next_notification`."""
    return {
        "hive.metastore.transactional.event.listeners": LISTENER_CLASS,
        "hive.metastore.dml.events": "true",  # fire_listener_event(INSERT) reaches the listener
    }


def cache_root() -> Path:
    """``$STREAMER_CACHE_DIR``, else ``$XDG_CACHE_HOME/streamer``, else ``~/.cache/streamer``."""
    explicit = os.environ.get("STREAMER_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streamer"


def build_key(source: bytes, jars_dir: Path) -> str:
    """Source and the jars it compiles against (their names carry the versions)."""
    digest = hashlib.sha256(source)
    for jar in sorted(p.name for p in jars_dir.glob("*.jar")):
        digest.update(b"\0" + jar.encode())
    return digest.hexdigest()[:16]


def listener_classes(jars_dir: Path, cache: Path | None = None) -> Path:
    """The directory holding the compiled listener (compiled now if the cache has no build of it)."""
    source = SOURCE.read_bytes()
    out = (cache or cache_root()) / "hms-listener" / build_key(source, jars_dir)
    if (out / "streamer" / "hms" / "StreamerNotificationListener.class").exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise MetastoreError(f"no `javac` on PATH: the metastore's notification listener is compiled on "
                             f"first use; {JDK_HINT}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=out.parent))
    try:
        done = subprocess.run(
            [javac, "-nowarn", "-d", str(tmp), "-cp", f"{jars_dir}/*", str(SOURCE)],
            capture_output=True, text=True, timeout=300, check=False,
        )
        if done.returncode != 0:
            raise MetastoreError(f"javac failed to compile {SOURCE.name} (code {done.returncode}):\n"
                                 f"{(done.stderr or done.stdout)[-2000:]}")
        try:
            tmp.rename(out)  # atomic: a concurrent build of the same key wins or loses whole
        except OSError:
            if not out.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
