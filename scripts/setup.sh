#!/usr/bin/env bash
# Installs what streamer needs and is missing: Java 17 (for the embedded metastore and Spark),
# the PostgreSQL JDBC driver (metastores on PostgreSQL), MIT Kerberos' headers (to build the
# `kerberos` module that Kerberos-secured metastores need), and a project virtualenv.
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}

java_ok() {
  command -v java >/dev/null 2>&1 || return 1
  local v
  v=$(java -version 2>&1 | head -n1 | sed -E 's/.*version "([0-9]+).*/\1/')
  [ "${v:-0}" -ge 17 ]
}

apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing $* with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive  # krb5-config would ask for a default realm
    (apt-get install -y -q "$@" >/dev/null 2>&1) || (apt-get update -q >/dev/null && apt-get install -y -q "$@" >/dev/null)
    return 0
  fi
  return 1
}

# A JDK, not only the JRE: `streamer hms run --notifications` (and its tests) compile a listener with
# javac. Java itself is required; javac only for that, so its absence is a note, not a failure.
if ! java_ok; then
  apt_install openjdk-17-jdk-headless || {
    echo "setup: a Java 17+ JDK is required. Install it (Debian/Ubuntu: sudo apt-get install openjdk-17-jdk-headless;" >&2
    echo "       macOS: brew install openjdk@17) and run this again." >&2
    exit 1
  }
elif ! command -v javac >/dev/null 2>&1; then
  apt_install openjdk-17-jdk-headless \
    || echo "setup: note: javac not found; 'streamer hms run --notifications' needs a JDK (openjdk-17-jdk-headless)" >&2
fi

if [ ! -f /usr/share/java/postgresql.jar ]; then
  apt_install libpostgresql-jdbc-java || echo "setup: note: libpostgresql-jdbc-java not installed; metastores on PostgreSQL need it" >&2
fi

if ! command -v krb5-config >/dev/null 2>&1 || ! command -v gcc >/dev/null 2>&1; then
  apt_install libkrb5-dev gcc || true
fi
EXTRAS=dev
if command -v krb5-config >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1; then
  EXTRAS=dev,kerberos
else
  echo "setup: note: libkrb5-dev not installed; --hms-auth kerberos needs it (then: pip install -e '.[kerberos]')" >&2
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e ".[$EXTRAS]"
echo "setup: ready ($VENV)" >&2
