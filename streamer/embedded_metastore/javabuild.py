"""streamer's Java classes for the embedded metastore, compiled on first use.

The listener and the local filesystem (``java/`` of this package) are compiled with ``javac`` against
PySpark's jars into a cache dir keyed by the hash of the sources and of the jars' names; a cached
build needs no JDK, a new one does. See docs/design/metastore.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from streamer.embedded_metastore.errors import MetastoreError

JAVA_DIR = Path(__file__).with_name("java")
JDK_HINT = "install a JDK (e.g. `apt-get install openjdk-17-jdk-headless`; scripts/setup.sh does)"


def sources() -> list[Path]:
    return sorted(JAVA_DIR.glob("*.java"))


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


def build_dir(jars_dir: Path, cache: Path | None = None) -> Path:
    """Where the build of the current sources against ``jars_dir`` lives (built or not)."""
    source = b"\0".join(p.name.encode() + b"\0" + p.read_bytes() for p in sources())
    return (cache or cache_root()) / "hms-java" / build_key(source, jars_dir)


def classes_dir(jars_dir: Path, why: str, cache: Path | None = None) -> Path:
    """The directory holding streamer's compiled classes (compiled now if the cache has no build).

    ``why`` names what needs them, for the error when no JDK is there to build them.
    """
    out = build_dir(jars_dir, cache)
    if (out / "streamer" / "hms").is_dir():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise MetastoreError(f"no `javac` on PATH: {why} is compiled on first use; {JDK_HINT}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=out.parent))
    try:
        done = subprocess.run(
            [javac, "-nowarn", "-d", str(tmp), "-cp", f"{jars_dir}/*", *(str(p) for p in sources())],
            capture_output=True, text=True, timeout=300, check=False,
        )
        if done.returncode != 0:
            raise MetastoreError(f"javac failed to compile {JAVA_DIR} (code {done.returncode}):\n"
                                 f"{(done.stderr or done.stdout)[-2000:]}")
        try:
            tmp.rename(out)  # atomic: a concurrent build of the same key wins or loses whole
        except OSError:
            if not out.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
