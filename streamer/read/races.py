"""What a read of a live replica must tell apart: a query that raced an apply, and a result that is not
a result yet.

A query that lists a table's files and reads them later fails when the target removed or replaced a
file in between (an INSERT OVERWRITE, a TRUNCATE, a re-applied partition): Spark then raises
``FAILED_READ_FILE.FILE_NOT_EXIST`` around a ``java.io.FileNotFoundException``. That is a race, to be
read again, not an error of the query. :func:`throwable_trail` lists what an exception carries
(Python chain, Spark error conditions, the Java cause chain); :func:`vanished_file` judges the list
(pure). A lazy result (a DataFrame, a Column, grouped data, an RDD, an iterator) would be evaluated
after the read was checked, so it proves nothing: :func:`lazy_part` finds one, :func:`refuse_lazy`
says what to return instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Spark error conditions of a file that disappeared between listing and reading (Spark 3.5: the legacy
# _LEGACY_ERROR_TEMP_2055 "File ... does not exist"; Spark 4: FAILED_READ_FILE.FILE_NOT_EXIST)
_VANISHED_CONDITIONS = ("FAILED_READ_FILE.FILE_NOT_EXIST", "_LEGACY_ERROR_TEMP_2055")
# Java exception classes of a file not found, by simple name (java.io, java.nio, Spark's own)
_VANISHED_CLASSES = ("FileNotFoundException", "NoSuchFileException")
_VANISHED_TEXT = ("[FAILED_READ_FILE.FILE_NOT_EXIST]", "java.io.FileNotFoundException",
                  "java.nio.file.NoSuchFileException")
_MAX_DEPTH = 30


@dataclass(frozen=True)
class Thrown:
    """One exception of a failure's chain: its class (a Java class name for a JVM throwable, else the
    Python class name), Spark's error condition if it has one, and its message."""

    kind: str
    condition: str | None = None
    message: str = ""


def vanished_file(trail: Sequence[Thrown]) -> Thrown | None:
    """The link of ``trail`` showing that a file the query listed was gone when it was read (None:
    not that). Matched on Spark's error condition, the Java exception's class, or, for exceptions
    that arrive as text only (Spark Connect, a re-raised message), on the condition in the text."""
    for link in trail:  # a condition or a class anywhere in the chain says most
        if link.condition and link.condition.upper().startswith(_VANISHED_CONDITIONS):
            return link
        simple = link.kind.rsplit(".", 1)[-1].rsplit("$", 1)[-1]
        if simple.endswith(_VANISHED_CLASSES) or simple == "FileNotFoundError":
            return link
    for link in trail:
        if any(text in link.message for text in _VANISHED_TEXT):
            return link
    return None


def throwable_trail(exc: BaseException) -> list[Thrown]:
    """What ``exc`` carries: each Python exception of its ``__cause__``/``__context__`` chain, and for
    a PySpark or Py4J exception every Java throwable of its cause chain (class, condition, message).
    Asking the JVM is best effort: a link it cannot describe is left out."""
    out: list[Thrown] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(out) < _MAX_DEPTH:
        seen.add(id(current))
        out.append(Thrown(type(current).__name__, _py_condition(current), _text(current)))
        java = getattr(current, "java_exception", None) or getattr(current, "_origin", None)
        if java is not None:
            out.extend(_java_trail(java))
        current = current.__cause__ or current.__context__
    return out


def _py_condition(exc: BaseException) -> str | None:
    getter = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    if getter is None:
        return None
    try:
        value = getter()
    except Exception:  # a JVM no longer there, an API of another Spark version
        return None
    return str(value) if value else None


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a PySpark exception whose JVM is gone
        return repr(exc)


def _java_trail(throwable: Any) -> Iterator[Thrown]:
    depth = 0
    while throwable is not None and depth < _MAX_DEPTH:
        depth += 1
        try:
            kind = str(throwable.getClass().getName())
            message = str(throwable.getMessage() or "")
        except Exception:  # not a Java object after all, or the gateway is closed
            return
        yield Thrown(kind, _java_condition(throwable), message)
        try:
            throwable = throwable.getCause()
        except Exception:
            return


def _java_condition(throwable: Any) -> str | None:
    for method in ("getCondition", "getErrorClass"):  # Spark 4, Spark 3.5
        try:
            value = getattr(throwable, method)()
        except Exception:  # not a SparkThrowable, or not this Spark version's method
            continue
        if value:
            return str(value)
    return None


# --- lazy results ---------------------------------------------------------------------------------

# classes of pyspark (classic and Spark Connect) and pandas-on-Spark that are plans, not data
_LAZY_NAMES = frozenset({
    "DataFrame", "Column", "GroupedData", "PandasCogroupedOps", "RDD", "PipelinedRDD", "Series", "Index",
    "DataFrameNaFunctions", "DataFrameStatFunctions", "DataFrameWriter", "DataFrameWriterV2",
})
_SCAN_ITEMS = 100  # a collect() of a million rows is not searched row by row
_SCAN_DEPTH = 4


def lazy_part(value: object) -> str | None:
    """Where ``value`` holds something Spark evaluates later (``result``, ``result[1]``,
    ``result['k']``, ``result.field``, with its class), or None. Looked for in lists, tuples, sets,
    dicts and dataclasses, up to a depth and the first items of each; rows are data."""
    return _lazy(value, "result", 0)


def _lazy(value: object, where: str, depth: int) -> str | None:
    kind = type(value)
    if _is_lazy_class(kind):
        return f"{where} is a {kind.__module__}.{kind.__name__}"
    if isinstance(value, Iterator):
        return f"{where} is an iterator ({kind.__name__}), read after the bracket"
    if depth >= _SCAN_DEPTH or kind.__module__.startswith("pyspark.sql.types"):  # Row: data
        return None
    items: list[tuple[str, object]] = []
    if isinstance(value, (str, bytes, bytearray)):
        return None
    if isinstance(value, Mapping):
        for n, (k, v) in enumerate(value.items()):
            if n >= _SCAN_ITEMS:
                break
            items += [(f"{where} key {k!r}", k), (f"{where}[{k!r}]", v)]
    elif isinstance(value, (list, tuple, set, frozenset)):
        for n, v in enumerate(value):
            if n >= _SCAN_ITEMS:
                break
            items.append((f"{where}[{n}]", v))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [(f"{where}.{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value)]
    for at, item in items:
        found = _lazy(item, at, depth + 1)
        if found is not None:
            return found
    return None


def _is_lazy_class(kind: type) -> bool:
    return any(
        base.__module__.startswith("pyspark") and base.__name__ in _LAZY_NAMES
        and not base.__module__.startswith("pyspark.sql.types")
        for base in kind.__mro__
    )


def refuse_lazy(value: object, what: str) -> None:
    """Raise ``TypeError`` when ``value`` holds a lazy Spark object: its rows would be read after the
    read was checked (later files, or none), so nothing could vouch for them."""
    found = lazy_part(value)
    if found is not None:
        raise TypeError(
            f"{what}: the query returned a lazy result ({found}): Spark would read it later, outside "
            "the checked read; return data instead: .collect(), .count(), .toPandas(), or a write"
        )
