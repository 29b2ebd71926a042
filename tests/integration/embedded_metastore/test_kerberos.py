"""Kerberos (SASL/GSSAPI) to a real metastore: a throwaway MIT KDC, a metastore that requires it.

The module starts an MIT Kerberos KDC (realm STREAMER.TEST) on a free loopback port with its
database, keytabs and ``krb5.conf`` in a temp dir, then the embedded Hive 2.3 metastore with
``hive.metastore.sasl.enabled=true`` and its service keytab. Clients get credentials from a client
keytab (HmsCatalog, the CLI) or from a ticket cache filled by ``kinit`` (the notification reader).
Hostnames are not canonicalised (``rdns = false``, ``dns_canonicalize_hostname = false``); the
server's principal is ``hive/localhost``, which clients reach as ``hive/_HOST`` on
``thrift://localhost:PORT`` (``_HOST`` = the URI's host, as Hive 2.3's client inside Spark does).

Skipped only when the KDC programs (Debian: krb5-kdc, krb5-admin-server, krb5-user) are missing.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore, free_port
from streamer.events.model import DatabaseSnapshot
from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM
from streamer.metastore.thrift import CatalogUnavailableError, HmsCatalog
from streamer.metastore.transport import CLIENT_KEYTAB_ENV, HmsAuth
from streamer.source.thrift_reader import ThriftNotificationReader

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

REALM = "STREAMER.TEST"
SERVER_PRINCIPAL = f"hive/localhost@{REALM}"
CLIENT_TEMPLATE = f"hive/_HOST@{REALM}"  # what a client configures, as in hive-site.xml
SERVICE_USER = f"streamer@{REALM}"  # logs in from a client keytab
HUMAN_USER = f"alice@{REALM}"  # logs in with kinit (ticket cache)
SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")


def _tool(name: str) -> str:
    path = shutil.which(name, path=SBIN)
    assert path is not None
    return path


@dataclass
class Kdc:
    dir: Path
    krb5_conf: Path
    server_keytab: Path
    client_keytab: Path
    human_keytab: Path
    env: dict[str, str]


def _run(cmd: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"{cmd[0]} failed ({done.returncode}): {done.stdout}\n{done.stderr}"


def _wait_listening(port: int, proc: subprocess.Popen[bytes], d: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"krb5kdc exited: {(d / 'krb5kdc.out').read_text(errors='replace')}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"krb5kdc did not listen on {port} within {timeout} s")


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    missing = [t for t in TOOLS if shutil.which(t, path=SBIN) is None]
    if missing:
        pytest.skip(f"MIT Kerberos programs missing ({', '.join(missing)}): "
                    "apt-get install krb5-kdc krb5-admin-server krb5-user")
    d = tmp_path_factory.mktemp("kdc")
    port = free_port()
    krb5_conf = d / "krb5.conf"
    krb5_conf.write_text(textwrap.dedent(f"""\
        [libdefaults]
          default_realm = {REALM}
          rdns = false
          dns_canonicalize_hostname = false
          dns_lookup_kdc = false
          dns_lookup_realm = false
          udp_preference_limit = 1
          ticket_lifetime = 1h
        [realms]
          {REALM} = {{
            kdc = 127.0.0.1:{port}
          }}
        [domain_realm]
          localhost = {REALM}
        """))
    kdc_conf = d / "kdc.conf"
    kdc_conf.write_text(textwrap.dedent(f"""\
        [kdcdefaults]
          kdc_ports = {port}
          kdc_tcp_ports = {port}
        [realms]
          {REALM} = {{
            database_name = {d}/principal
            key_stash_file = {d}/stash
            acl_file = {d}/kadm5.acl
            supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
            max_life = 1h
          }}
        [logging]
          kdc = FILE:{d}/kdc.log
        """))
    env = {**os.environ, "KRB5_CONFIG": str(krb5_conf), "KRB5_KDC_PROFILE": str(kdc_conf)}
    _run([_tool("kdb5_util"), "create", "-s", "-r", REALM, "-P", uuid.uuid4().hex], env)
    keytabs = {SERVER_PRINCIPAL: d / "hive.keytab", SERVICE_USER: d / "streamer.keytab",
               HUMAN_USER: d / "alice.keytab"}
    for principal, keytab in keytabs.items():
        _run([_tool("kadmin.local"), "-q", f"addprinc -randkey {principal}"], env)
        _run([_tool("kadmin.local"), "-q", f"ktadd -k {keytab} {principal}"], env)
    with (d / "krb5kdc.out").open("wb") as out:
        proc = subprocess.Popen([_tool("krb5kdc"), "-n"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        _wait_listening(port, proc, d)
        _run([_tool("kinit"), "-c", f"FILE:{d}/probe.cc", "-kt", str(keytabs[SERVICE_USER]),
              SERVICE_USER], env)  # the KDC answers
        yield Kdc(d, krb5_conf, keytabs[SERVER_PRINCIPAL], keytabs[SERVICE_USER], keytabs[HUMAN_USER],
                  {"KRB5_CONFIG": str(krb5_conf)})
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(autouse=True)
def krb_env(kdc: Kdc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's Kerberos library uses the test realm; each test starts with no credentials."""
    monkeypatch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/krb5cc")
    monkeypatch.delenv(CLIENT_KEYTAB_ENV, raising=False)  # restored (unset) after the test


def _keytab_auth(kdc: Kdc) -> HmsAuth:
    return HmsAuth("kerberos", CLIENT_TEMPLATE, SERVICE_USER, str(kdc.client_keytab))


@pytest.fixture(scope="module")
def secure_hms(kdc: Kdc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedMetastore]:
    work = tmp_path_factory.mktemp("hms-krb")
    # the readiness probe's Kerberos settings (module scope); a cache of its own, since a cache
    # holding tickets of an older realm with the same names makes the server refuse them
    saved = {k: os.environ.get(k) for k in ("KRB5_CONFIG", "KRB5CCNAME")}
    os.environ["KRB5_CONFIG"] = str(kdc.krb5_conf)
    os.environ["KRB5CCNAME"] = f"FILE:{work}/probe.cc"
    server = EmbeddedMetastore(
        work_dir=work,
        warehouse_dir=work / "warehouse",
        site_overrides={
            "hive.metastore.sasl.enabled": "true",
            "hive.metastore.kerberos.principal": SERVER_PRINCIPAL,
            "hive.metastore.kerberos.keytab.file": str(kdc.server_keytab),
            "hadoop.security.authentication": "kerberos",
        },
        jvm_options=[f"-Djava.security.krb5.conf={kdc.krb5_conf}"],
        # the probe connects to 127.0.0.1, so it names the principal outright
        client_auth=HmsAuth("kerberos", SERVER_PRINCIPAL, SERVICE_USER, str(kdc.client_keytab)),
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()
        os.environ.pop(CLIENT_KEYTAB_ENV, None)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _uri(hms: EmbeddedMetastore) -> str:
    return f"thrift://localhost:{hms.port}"


def _kdc_log(kdc: Kdc) -> str:
    return (kdc.dir / "kdc.log").read_text(errors="replace")


def test_catalog_with_client_keytab_creates_and_reads_a_database(
    kdc: Kdc, secure_hms: EmbeddedMetastore
) -> None:
    name = f"krb_{uuid.uuid4().hex[:8]}"
    with HmsCatalog(_uri(secure_hms), auth=_keytab_auth(kdc)) as catalog:
        catalog.create_database(DatabaseSnapshot(name=name, parameters={"k": "v"}))
        got = catalog.get_database(name)
        assert got is not None and got.parameters.get("k") == "v"
        assert name in catalog.list_databases()
    # the ticket for the metastore's principal really came from the KDC, for the keytab's user
    assert f"{SERVICE_USER} for {SERVER_PRINCIPAL}" in _kdc_log(kdc)


def test_plain_client_is_refused(secure_hms: EmbeddedMetastore) -> None:
    with pytest.raises(CatalogUnavailableError):
        HmsCatalog(_uri(secure_hms), timeout_s=10).list_databases()


def test_client_without_credentials_is_refused(secure_hms: EmbeddedMetastore) -> None:
    auth = HmsAuth("kerberos", CLIENT_TEMPLATE)  # empty ticket cache, no keytab
    with pytest.raises(CatalogUnavailableError, match="with Kerberos"):
        HmsCatalog(_uri(secure_hms), timeout_s=10, auth=auth)


def test_wrong_server_principal_is_refused(kdc: Kdc, secure_hms: EmbeddedMetastore) -> None:
    auth = HmsAuth("kerberos", f"hive/elsewhere@{REALM}", SERVICE_USER, str(kdc.client_keytab))
    with pytest.raises(CatalogUnavailableError):
        HmsCatalog(_uri(secure_hms), timeout_s=10, auth=auth)


def test_thrift_reader_with_ticket_cache_reads_the_notification_api(
    kdc: Kdc, secure_hms: EmbeddedMetastore, tmp_path: Path
) -> None:
    name = f"krb_{uuid.uuid4().hex[:8]}"
    with HmsCatalog(_uri(secure_hms), auth=_keytab_auth(kdc)) as catalog:
        catalog.create_database(DatabaseSnapshot(name=name))
    # from here on only alice's ticket cache (kinit replaces the keytab user's tickets in it)
    os.environ.pop(CLIENT_KEYTAB_ENV, None)
    _run([_tool("kinit"), "-c", os.environ["KRB5CCNAME"], "-kt", str(kdc.human_keytab), HUMAN_USER],
         {**os.environ})
    reader = ThriftNotificationReader(_uri(secure_hms), auth=HmsAuth("kerberos", CLIENT_TEMPLATE))
    try:
        head = reader.head_event_id()  # Derby's log has no listener writing it: a real call, head 0
        assert head >= 0
        assert reader.read_after(head, 10) == []
        assert name in reader.databases()
    finally:
        reader.close()
    assert f"{HUMAN_USER} for {SERVER_PRINCIPAL}" in _kdc_log(kdc)
    plain = ThriftNotificationReader(_uri(secure_hms), timeout_seconds=10)
    with pytest.raises(Exception):  # noqa: B017 - the server drops the plain connection
        plain.head_event_id()
    plain.close()


def _streamer(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    streamer = str(Path(sys.executable).parent / "streamer")
    return subprocess.run([streamer, *args], env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_status_cli_over_kerberos(kdc: Kdc, secure_hms: EmbeddedMetastore, tmp_path: Path) -> None:
    name = f"krb_{uuid.uuid4().hex[:8]}"
    with HmsCatalog(_uri(secure_hms), auth=_keytab_auth(kdc)) as catalog:
        catalog.create_database(DatabaseSnapshot(name=name, parameters={REPL_SOURCE_PARAM: "prod",
                                                                        LAST_ID_PARAM: "42"}))
    env = {k: v for k, v in os.environ.items() if k != CLIENT_KEYTAB_ENV}
    env["KRB5CCNAME"] = f"FILE:{tmp_path}/cli.cc"  # empty: the keytab is the only credential
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "job-mode.json").write_text("{}")  # a job's state dir
    flags = ["status", "--hms-uri", _uri(secure_hms), "--state-dir", str(tmp_path / "state"),
             "--output", "json"]
    done = _streamer(*flags, "--hms-auth", "kerberos", "--hms-kerberos-principal", CLIENT_TEMPLATE,
                     "--hms-client-principal", SERVICE_USER, "--hms-client-keytab", str(kdc.client_keytab),
                     env=env)
    assert done.returncode == 0, done.stderr
    rows = {r["db"]: r for r in json.loads(done.stdout)["databases"]}
    assert rows[name]["last_applied_event_id"] == 42

    # the same through the environment twins
    twins = {**env, "STREAMER_STATUS_HMS_AUTH": "kerberos",
             "STREAMER_STATUS_HMS_KERBEROS_PRINCIPAL": CLIENT_TEMPLATE,
             "STREAMER_STATUS_HMS_CLIENT_PRINCIPAL": SERVICE_USER,
             "STREAMER_STATUS_HMS_CLIENT_KEYTAB": str(kdc.client_keytab)}
    done = _streamer(*flags, env=twins)
    assert done.returncode == 0, done.stderr
    assert name in {r["db"] for r in json.loads(done.stdout)["databases"]}

    refused = _streamer(*flags, env=env)  # plain Thrift: the server drops it
    assert refused.returncode != 0
    missing = _streamer(*flags, "--hms-auth", "kerberos", env=env)
    assert missing.returncode == 2 and "principal" in missing.stderr


def test_spark_session_reads_the_kerberos_metastore(
    kdc: Kdc, secure_hms: EmbeddedMetastore, tmp_path: Path
) -> None:
    """The target job's own session (``job.streaming.spark_session``) lists databases over SASL."""
    name = f"krb_{uuid.uuid4().hex[:8]}"
    with HmsCatalog(_uri(secure_hms), auth=_keytab_auth(kdc)) as catalog:
        catalog.create_database(DatabaseSnapshot(name=name))
    script = textwrap.dedent(f"""\
        from streamer.metastore.transport import HmsAuth
        from streamer.target.job.settings import (
            KafkaSettings, LayoutSettings, MetastoreSettings, TargetSettings)
        from streamer.target.job.streaming import spark_session
        settings = TargetSettings(
            kafka=KafkaSettings(bootstrap_servers="unused:9092", topic="t"),
            metastore=MetastoreSettings(
                uri={_uri(secure_hms)!r},
                auth=HmsAuth("kerberos", {CLIENT_TEMPLATE!r}, {SERVICE_USER!r}, {str(kdc.client_keytab)!r}),
            ),
            layout=LayoutSettings(warehouse_root={str(secure_hms.warehouse_dir)!r},
                                  state_dir={str(tmp_path)!r}, checkpoint_dir={str(tmp_path / "cp")!r}),
        )
        spark = spark_session(settings)
        print("DATABASES", sorted(r[0] for r in spark.sql("SHOW DATABASES").collect()))
        spark.stop()
        """)
    env = {k: v for k, v in os.environ.items() if k not in (CLIENT_KEYTAB_ENV, "PYSPARK_SUBMIT_ARGS")}
    env["KRB5CCNAME"] = f"FILE:{tmp_path}/spark.cc"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert name in done.stdout, done.stdout
