"""The ``--fs-option``/``--hdfs-driver`` flags of every command that reads or writes data files.

One definition keeps names, help and validation the same for the agent, the bootstrap and the
target. The decorator consumes both flags itself and configures ``streamer.filesystems`` before the
command runs, so a bad option is a ``ConfigError`` (exit 2) before anything connects.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

from streamer.filesystems import HDFS_DRIVERS, FsSettings, configure, parse_fs_options

F = TypeVar("F", bound=Callable[..., Any])


def fs_settings(pairs: tuple[str, ...] | list[str], hdfs_driver: str) -> FsSettings:
    """The validated settings from the flags' values."""
    return FsSettings(options=parse_fs_options(pairs), hdfs_driver=hdfs_driver)


def fs_options(env_prefix: str | None = None) -> Callable[[F], F]:
    """Adds the flags; ``env_prefix`` gives explicit env twins (``STREAMER_FS_OPTION``...), else the
    command's automatic ones apply (``STREAMER_TARGET_RUN_FS_OPTION``...)."""

    def env(name: str) -> dict[str, Any]:
        return {"envvar": f"{env_prefix}{name}", "show_envvar": True} if env_prefix else {}

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def command(*args: Any, fs_option: tuple[str, ...] = (), hdfs_driver: str = "auto",
                    **kwargs: Any) -> Any:
            configure(fs_settings(fs_option, hdfs_driver))
            return f(*args, **kwargs)

        wrapped: Any = command
        wrapped = click.option(
            "--hdfs-driver",
            type=click.Choice(HDFS_DRIVERS),
            default="auto",
            show_default=True,
            **env("HDFS_DRIVER"),
            help="How hdfs:// paths are opened: libhdfs (pyarrow, needs HADOOP_HOME or "
            "ARROW_LIBHDFS_DIR and the Hadoop CLASSPATH), webhdfs (HTTP to the namenode), or auto "
            "(libhdfs when found, else webhdfs).",
        )(wrapped)
        wrapped = click.option(
            "--fs-option",
            "fs_option",
            multiple=True,
            metavar="PROTOCOL.KEY=VALUE",
            **env("FS_OPTION"),
            help="Filesystem setting passed to fsspec, e.g. s3.endpoint_url=http://minio:9000, "
            "s3.client_kwargs.region_name=eu-west-1, webhdfs.host=nn1, webhdfs.port=9870; repeatable "
            "(env: space-separated). S3 credentials are best left to the AWS environment variables "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_PROFILE).",
        )(wrapped)
        return cast(F, wrapped)

    return decorate
