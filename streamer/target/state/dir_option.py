"""``--state-dir``: one option for every command that reads or writes a target's state, so each
accepts the same spellings (a path or a ``file://`` URL) and refuses the same others.

The state is replaced with rename + fsync, which a POSIX mount (NFS, CephFS, EFS) gives but an
object store does not: a URL of another scheme is refused rather than taken as a relative path.
Only ``streamer target run`` creates the directory; every command that reads or changes a target's
state refuses one that does not exist, or holds no target's state (an empty or unrelated directory),
in one line (exit 2) before any work: a mistyped path must not read as "nothing halted", "no drift"
or "not halted". Which target a state dir belongs to is checked by each command against what it
was given (``streamer.target.state.binding``).
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import click

from streamer.errors import ConfigError
from streamer.target.state.binding import has_state

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_HELP = (
    "Directory of this target's durable state (halts, skips, progress): a path or file:// URL, "
    "on a shared mount when the driver may restart on another host."
)


def parse_state_dir(value: str) -> Path:
    """The local directory ``value`` names: a path, ``file:/p``, ``file:///p`` or ``file://localhost/p``.

    Raises ``ValueError`` (with the message an operator sees) for any other scheme or host.
    """
    parts = urlsplit(value)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"{value!r} names host {parts.netloc!r}: the state dir must be a local or "
                             "mounted directory (a path or file:///path)")
        return Path(unquote(parts.path))
    if parts.scheme and len(parts.scheme) > 1:  # one letter is a Windows drive, not a scheme
        raise ValueError(
            f"{value!r}: the state dir must be a mounted filesystem (a path or file:// URL); put it on a "
            "shared mount for a driver that may restart elsewhere. --checkpoint-dir takes any Hadoop URL."
        )
    return Path(value)


def new_state_dir_callback(ctx: click.Context, param: click.Parameter, value: str) -> Path:
    """Click's side of `parse_state_dir` for the job, which creates the directory: a refused value
    is a usage error naming the option."""
    try:
        path = parse_state_dir(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from exc
    if path.exists() and not path.is_dir():
        raise click.BadParameter(f"{str(path)!r} is a file, not a directory", ctx, param)
    check_not_shared(path, value)
    return path


def check_not_shared(path: Path, value: str) -> None:
    """Refuse a state dir every user may write (without the sticky bit): anyone could plant a
    symlink for the job to follow, a forged halt or skip, or remove its progress."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return  # `target run` creates it (0o755 under the usual umask)
    if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
        raise ConfigError(
            f"--state-dir {value}: every user may write to it (mode {stat.S_IMODE(mode):o}), so any of them "
            f"could plant links or forge its halts and progress; `chmod o-w {path}` (or give a private "
            "directory)"
        )


def state_dir_callback(ctx: click.Context, param: click.Parameter, value: str) -> Path:
    """As `new_state_dir_callback`, and the directory must exist and hold a target's state (commands
    that read the state)."""
    path = new_state_dir_callback(ctx, param, value)
    if not path.exists():
        raise ConfigError(
            f"--state-dir {value}: no such directory; give the --state-dir of the target job "
            "(`streamer target run` creates it on its first start)"
        )
    if not has_state(path):
        raise ConfigError(
            f"--state-dir {value}: holds no target state (no `streamer target run` has used it); give the "
            "--state-dir of the target job"
        )
    return path


def state_dir_option(help_text: str = DEFAULT_HELP, *, create: bool = False) -> Callable[[F], F]:
    """The required ``--state-dir`` option, delivered to the command as a `Path`; it must exist
    unless the command is the one that ``create``s it."""
    callback = new_state_dir_callback if create else state_dir_callback
    return click.option("--state-dir", required=True, callback=callback, help=help_text)
