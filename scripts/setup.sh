#!/usr/bin/env bash
# Installs what streamer needs and is missing: Java 17 (for the embedded metastore and Spark),
# the PostgreSQL JDBC driver (metastores on PostgreSQL), and a project virtualenv with streamer in it.
# EXTRAS chooses what else goes into the virtualenv:
#   runtime (`make demo`): streamer and its runtime dependencies; the `kerberos` extra too when it can
#                          be built here (MIT Kerberos' headers and gcc present)
#   dev     (`make test`): the same plus the test tooling (the `dev` extra); MIT Kerberos' headers, a
#                          KDC and Prometheus (promtool) are installed first if missing, so that the
#                          Kerberos and alert-rule tests run instead of skipping
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
EXTRAS=${EXTRAS:-dev}
case "$EXTRAS" in
  runtime|dev) ;;
  *) echo "setup: EXTRAS must be runtime or dev, not '$EXTRAS'" >&2; exit 2 ;;
esac

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
    (apt-get install -y -q "$@" >/dev/null 2>&1) || (apt-get update -q >/dev/null && apt-get install -y -q "$@" >/dev/null) \
      || return 1
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

# Test-only tools (not the runtime's, so not the Dockerfile's either).
apt_install_for_tests() { apt_install "$@"; }

# Test-only services (EXTRAS=dev): promtool and a Prometheus server for the alert-rule tests, and an
# MIT Kerberos KDC for the metastore Kerberos tests. Without root or apt-get they are not installed and
# those tests skip, each naming the package to install.
if [ "$EXTRAS" = dev ]; then
  if ! command -v promtool >/dev/null 2>&1; then
    apt_install_for_tests prometheus || echo "setup: note: promtool not installed; the Prometheus tests will skip (apt-get install prometheus)" >&2
  fi
  if ! command -v krb5kdc >/dev/null 2>&1 && [ ! -x /usr/sbin/krb5kdc ]; then
    apt_install_for_tests krb5-kdc krb5-admin-server krb5-user \
      || echo "setup: note: krb5-kdc not installed; the Kerberos tests will skip (apt-get install krb5-kdc krb5-admin-server krb5-user)" >&2
  fi
fi

kerberos_buildable() { command -v krb5-config >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1; }
if [ "$EXTRAS" = dev ] && ! kerberos_buildable; then
  apt_install libkrb5-dev gcc || true
fi
extras=()
[ "$EXTRAS" = dev ] && extras+=(dev)
if kerberos_buildable; then
  extras+=(kerberos)
elif [ "$EXTRAS" = dev ]; then
  echo "setup: note: libkrb5-dev not installed; --hms-auth kerberos needs it (then: pip install -e '.[kerberos]')" >&2
fi
spec=.
if [ ${#extras[@]} -gt 0 ]; then
  spec=".[$(IFS=,; echo "${extras[*]}")]"
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e "$spec"
echo "setup: ready ($VENV: $spec)" >&2
