"""Hive's encodings of file references and partition names.

Messages name files as ``uri#checksum#cmroot#subdir`` (Hive 3/4, ReplChangeManager), ``uri#checksum``
or ``uri`` (Hive 2.3); a file's change-management copy lives at ``<cmroot>/<name>_<checksum>``.
Partition names are ``k=v/k2=v2`` with Hive's path escaping (FileUtils.escapePathName), so a value
holding ``/`` or ``=`` cannot be confused with the separators.
"""

from __future__ import annotations

import posixpath

from streamer.events.model import FileRef

DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"
_SEP = "#"
# FileUtils.charToEscape (non-Windows): control characters and these
_ESCAPED = frozenset(chr(c) for c in range(1, 0x20)) | frozenset("\"#%'*/:=?\\\x7f{[]^")


def parse_file_uri(text: str, partition: str | None = None) -> FileRef:
    """Split an encoded file reference; ``cm_uri`` is derived when cmroot and checksum are known."""
    parts = text.split(_SEP)
    if len(parts) > 4 or not parts[0]:
        raise ValueError(f"malformed file reference {text!r}: expected uri[#checksum[#cmroot[#subdir]]]")
    uri, checksum, cmroot, subdir = [*parts, "", "", ""][:4]
    cm_uri = cm_path(cmroot, uri, checksum) if cmroot and checksum else None
    return FileRef(
        uri=uri,
        checksum=checksum or None,
        cm_uri=cm_uri,
        subdir=subdir or None,
        partition=partition,
    )


def cm_path(cmroot: str, uri: str, checksum: str) -> str:
    """Where the change manager keeps a copy of ``uri``: one flat directory, name + checksum."""
    return f"{cmroot.rstrip('/')}/{posixpath.basename(uri)}_{checksum}"


def format_file_uri(ref: FileRef, cmroot: str | None) -> str:
    """``uri#checksum#cmroot#subdir`` as Hive 3/4 write it (empty parts when unknown)."""
    if _SEP in ref.uri:
        raise ValueError(f"file uri {ref.uri!r} contains {_SEP!r}, which Hive's encoding cannot carry")
    return _SEP.join([ref.uri, ref.checksum or "", cmroot or "", ref.subdir or ""])


def cmroot_of(ref: FileRef) -> str | None:
    """The cmroot a reference's ``cm_uri`` lives in (its directory)."""
    return posixpath.dirname(ref.cm_uri) if ref.cm_uri else None


# --- partition names --------------------------------------------------------------------------


def escape_path_name(text: str) -> str:
    if not text:
        return DEFAULT_PARTITION_NAME
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def unescape_path_name(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%" and _is_hex(text[i + 1 : i + 3]):
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _is_hex(s: str) -> bool:
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


def partition_name(keys: list[str], values: list[str]) -> str:
    """Hive's partition name (FileUtils.makePartName): lower-cased keys, escaped keys and values."""
    if len(keys) != len(values):
        raise ValueError(f"partition has {len(values)} values for {len(keys)} keys {keys!r}")
    return "/".join(
        f"{escape_path_name(k.lower())}={escape_path_name(v)}" for k, v in zip(keys, values, strict=True)
    )


def parse_partition_name(name: str) -> dict[str, str]:
    """``k=v/k2=v2`` -> ``{k: v, k2: v2}`` in order, unescaped (Warehouse.makeSpecFromName)."""
    spec: dict[str, str] = {}
    for part in name.split("/"):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ValueError(f"malformed partition name {name!r}: {part!r} is not key=value")
        spec[unescape_path_name(key)] = unescape_path_name(value)
    return spec


def is_hidden(name: str) -> bool:
    """Names Hive's readers skip (``FileUtils.HIDDEN_FILES_PATH_FILTER``)."""
    return name.startswith((".", "_"))
