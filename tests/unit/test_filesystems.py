"""Which filesystem a URL opens, and the settings that shape it (no server needed: constructing
s3fs and WebHDFS clients makes no request)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec.config
import pytest
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.webhdfs import WebHDFS
from hypothesis import given
from hypothesis import strategies as st

from streamer import filesystems
from streamer.errors import ConfigError
from streamer.filesystems import (
    FsSettings,
    atomic_rename,
    choose_hdfs_driver,
    libhdfs_path,
    parse_fs_options,
    url_to_fs,
    webhdfs_arguments,
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from default settings and leaves fsspec's global config as it was."""
    monkeypatch.setattr(fsspec.config, "conf", {})
    monkeypatch.setattr(filesystems, "_settings", FsSettings())


def test_options_nest_parse_json_values_and_alias_s3a() -> None:
    got = parse_fs_options([
        "s3.endpoint_url=http://127.0.0.1:9000",
        "s3a.client_kwargs.region_name=eu-west-1",
        "s3.anon=false",
        "webhdfs.port=50070",
        "webhdfs.host=nn1.example.com",
        's3.config_kwargs={"s3": {"addressing_style": "path"}}',
    ])
    assert got == {
        "s3": {
            "endpoint_url": "http://127.0.0.1:9000",
            "client_kwargs": {"region_name": "eu-west-1"},
            "anon": False,
            "config_kwargs": {"s3": {"addressing_style": "path"}},
        },
        "webhdfs": {"port": 50070, "host": "nn1.example.com"},
    }


@pytest.mark.parametrize("bad", ["s3", "s3=1", "endpoint_url=x", "gcs.token=x", "s3..x=1", "s3.a"])
def test_bad_options_are_refused_by_name(bad: str) -> None:
    with pytest.raises(ConfigError, match="--fs-option"):
        parse_fs_options([bad])


def test_a_key_cannot_be_both_a_value_and_a_table() -> None:
    with pytest.raises(ConfigError, match="already set"):
        parse_fs_options(["s3.client_kwargs=1", "s3.client_kwargs.region_name=x"])


@given(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), st.from_regex(r"[A-Za-z/:._-]{1,20}", fullmatch=True))
def test_any_plain_key_and_text_value_round_trip(key: str, value: str) -> None:
    assert parse_fs_options([f"s3.{key}={value}"]) == {"s3": {key: value}}


def test_secrets_are_masked_when_printed() -> None:
    settings = FsSettings(options=parse_fs_options([
        "s3.key=AKIA123", "s3.secret=hunter2", "s3.client_kwargs.aws_session_token=tok",
        "s3.endpoint_url=http://e",
    ]))
    text = repr(settings)
    assert "AKIA123" not in text and "hunter2" not in text and "tok'" not in text
    assert "http://e" in text
    assert settings.masked()["options"]["s3"]["client_kwargs"]["aws_session_token"] == "*****"


def test_unknown_hdfs_driver_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="--hdfs-driver"):
        FsSettings(hdfs_driver="jni")


def test_libhdfs_is_found_where_pyarrow_looks(tmp_path: Path) -> None:
    assert libhdfs_path({}) is None
    assert libhdfs_path({"HADOOP_HOME": str(tmp_path)}) is None
    native = tmp_path / "lib" / "native"
    native.mkdir(parents=True)
    (native / "libhdfs.so").write_bytes(b"")
    assert libhdfs_path({"HADOOP_HOME": str(tmp_path)}) == native / "libhdfs.so"
    other = tmp_path / "arrow"
    other.mkdir()
    (other / "libhdfs.so").write_bytes(b"")
    env = {"ARROW_LIBHDFS_DIR": str(other), "HADOOP_HOME": str(tmp_path)}
    assert libhdfs_path(env) == other / "libhdfs.so"


@pytest.mark.parametrize(
    ("requested", "found", "chosen"),
    [("auto", True, "libhdfs"), ("auto", False, "webhdfs"), ("webhdfs", True, "webhdfs"),
     ("libhdfs", False, "libhdfs")],
)
def test_hdfs_driver_choice(requested: str, found: bool, chosen: str) -> None:
    assert choose_hdfs_driver(requested, Path("/x/libhdfs.so") if found else None) == chosen


def test_webhdfs_address_from_the_url_or_the_options() -> None:
    assert webhdfs_arguments("hdfs://nn1:8020/warehouse/a.db", {}) == (
        {"host": "nn1", "port": 9870}, "/warehouse/a.db")
    assert webhdfs_arguments("hdfs://hive@nn1/w", {"port": 50070}) == (
        {"host": "nn1", "port": 50070, "user": "hive"}, "/w")
    # an HA nameservice is no host: the namenode's HTTP address comes from the options
    kwargs, path = webhdfs_arguments("hdfs://prodns/w", {"host": "nn2.example.com", "use_https": True})
    assert kwargs == {"host": "nn2.example.com", "port": 9870, "use_https": True} and path == "/w"
    assert "user" not in webhdfs_arguments("hdfs://hive@nn1/w", {"kerberos": True})[0]
    with pytest.raises(ConfigError, match="namenode"):
        webhdfs_arguments("hdfs:///w", {})


def test_hdfs_urls_open_webhdfs_without_libhdfs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HADOOP_HOME", raising=False)
    monkeypatch.delenv("ARROW_LIBHDFS_DIR", raising=False)
    filesystems.configure(FsSettings(options=parse_fs_options(["webhdfs.port=50070"])))
    fs, path = url_to_fs("hdfs://nn1:8020/warehouse/a.db/t")
    assert isinstance(fs, WebHDFS) and path == "/warehouse/a.db/t"
    assert fs.url == "http://nn1:50070/webhdfs/v1"
    fs, path = url_to_fs("webhdfs://nn3/x")
    assert isinstance(fs, WebHDFS) and fs.url == "http://nn3:50070/webhdfs/v1" and path == "/x"


def test_libhdfs_driver_uses_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forced libhdfs goes to pyarrow's HadoopFileSystem, which fails here: no libhdfs is installed."""
    filesystems.configure(FsSettings(hdfs_driver="libhdfs"))
    with pytest.raises(OSError, match=r"(?i)hdfs|hadoop|java|jvm"):
        url_to_fs("hdfs://nn1:8020/w")


def test_s3_and_s3a_open_s3fs_with_the_configured_options() -> None:
    filesystems.configure(FsSettings(options=parse_fs_options(["s3.endpoint_url=http://127.0.0.1:1"])))
    for url in ("s3://bucket/warehouse/a.db", "s3a://bucket/warehouse/a.db"):
        fs, path = url_to_fs(url)
        assert type(fs).__name__ == "S3FileSystem" and path == "bucket/warehouse/a.db"
        opts: Any = fs.storage_options
        assert opts["endpoint_url"] == "http://127.0.0.1:1", opts
        assert opts["use_listings_cache"] is False  # another writer's files are never hidden


def test_local_paths_stay_local() -> None:
    for url in ("/tmp/x", "file:///tmp/x"):
        fs, path = url_to_fs(url)
        assert isinstance(fs, LocalFileSystem) and path == "/tmp/x"


@pytest.mark.parametrize(
    ("url", "atomic"),
    [("s3://b/x", False), ("s3a://b/x", False), ("gs://b/x", False), ("hdfs://nn/x", True),
     ("file:///x", True), ("/x", True)],
)
def test_which_stores_rename_atomically(url: str, atomic: bool) -> None:
    assert atomic_rename(url) is atomic


def test_cli_refuses_a_bad_fs_option_with_exit_2() -> None:
    from streamer.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["target", "run", "--bootstrap-servers", "x:1", "--hms-uri", "thrift://x:1",
              "--warehouse-root", "s3a://b/w", "--state-dir", "/nonexistent/s", "--fs-option", "nodot=1"])
    assert exc.value.code == 2
