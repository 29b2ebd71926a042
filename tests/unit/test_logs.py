"""Log hygiene: secrets masked in every line, one record one line in the text format, JSON stays JSON."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.logs import configure_logging, escape_controls, mask_secrets


@pytest.fixture
def logged() -> Iterator[Callable[[str], io.StringIO]]:
    """``logged(fmt)``: set logging up as the CLI does and return what its handler writes; the root
    logger's handlers and level are restored after."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level

    def configure(fmt: str) -> io.StringIO:
        configure_logging("INFO", fmt)
        buffer = io.StringIO()
        handler = root.handlers[0]
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(buffer)
        return buffer

    yield configure
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


SECRET = "Pa55-w0rd"
LEAKY = [
    f"notification database URL 'postgress://hive:{SECRET}@db:5432/metastore': unknown scheme",
    f"kafka settings {{'sasl.password': '{SECRET}', 'bootstrap.servers': 'k:9092'}}",
    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="svc" password="{SECRET}";',
    f"-X ssl.key.password={SECRET} -X sasl.mechanism=PLAIN",
    f"mysql://root:{SECRET}@mariadb/metastore?ssl=true",
]


@pytest.mark.parametrize("line", LEAKY)
def test_secrets_are_masked(line: str) -> None:
    masked = mask_secrets(line)
    assert SECRET not in masked
    assert "***" in masked


def test_what_is_not_a_secret_stays() -> None:
    for line in (
        "metrics basic auth needs both a user and a password",
        "mysql://root@mariadb/metastore",
        "hdfs://nn:8020/warehouse/sales.db/orders",
        "bootstrap.servers=k:9092 sasl.mechanism=SCRAM-SHA-512",
    ):
        assert mask_secrets(line) == line


_URL_TEXT = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~%!$'()*+,;=", min_size=1
)


@given(user=_URL_TEXT.filter(lambda u: ":" not in u), password=st.text(
    st.characters(blacklist_categories=("Cs", "Zs", "Cc"), blacklist_characters="/"), min_size=1
), host=st.from_regex(r"[a-z][a-z0-9.-]{0,20}(:[0-9]{1,5})?", fullmatch=True))
def test_any_url_password_is_masked(user: str, password: str, host: str) -> None:
    url = f"postgresql://{user}:{password}@{host}/metastore"
    assert mask_secrets(f"cannot connect to {url}: refused") == (
        f"cannot connect to postgresql://{user}:***@{host}/metastore: refused"
    )


@given(st.text())
def test_escaped_text_has_no_control_characters(text: str) -> None:
    escaped = escape_controls(text)
    assert not any(ord(c) < 0x20 or ord(c) == 0x7F or c in "\u0085\u2028\u2029" for c in escaped)
    assert escaped == text or "\\" in escaped


def test_a_newline_in_a_name_cannot_forge_a_text_log_line(logged: Callable[[str], io.StringIO]) -> None:
    stderr = logged("text")
    forged = "sales\n2026-01-01 00:00:00,000 ERROR   streamer.target: database hr dropped"
    logging.getLogger("streamer.test").warning("database %s halted at event %d", forged, 7)
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 1
    assert "sales\\n2026-01-01" in lines[0]


def test_text_log_lines_and_tracebacks_are_masked(logged: Callable[[str], io.StringIO]) -> None:
    stderr = logged("text")
    log = logging.getLogger("streamer.test")
    log.warning("connecting to %s", f"postgresql://hive:{SECRET}@db/metastore")
    try:
        raise ValueError(f"bad setting sasl.password={SECRET}")
    except ValueError:
        log.exception("failed")
    out = stderr.getvalue()
    assert SECRET not in out
    assert "postgresql://hive:***@db/metastore" in out and "Traceback" in out


def test_json_log_lines_stay_json_and_are_masked(logged: Callable[[str], io.StringIO]) -> None:
    stderr = logged("json")
    log = logging.getLogger("streamer.test")
    log.warning("db %s: %s", "x\ny\x00\u2028", f"sasl.jaas.config=Module required password='{SECRET}';")
    try:
        raise RuntimeError(f"mysql://u:{SECRET}@h/m")
    except RuntimeError:
        log.exception("failed")
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 2
    records = [json.loads(line) for line in lines]
    assert records[0]["msg"].startswith("db x\ny\x00\u2028: sasl.jaas.config=")
    assert SECRET not in stderr.getvalue()
    assert "mysql://u:***@h/m" in records[1]["exc"]


def test_a_newline_in_an_exception_message_cannot_forge_a_line_after_the_traceback(
    logged: Callable[[str], io.StringIO],
) -> None:
    stderr = logged("text")
    forged = "sales\n2026-01-01 00:00:00,000 ERROR   streamer.target: database hr dropped"
    try:
        try:
            raise KeyError(forged)
        except KeyError as inner:
            raise ValueError(f"cannot apply {forged}") from inner
    except ValueError:
        logging.getLogger("streamer.test").exception("failed")
    lines = stderr.getvalue().splitlines()
    assert not [line for line in lines if line.startswith("2026-01-01")], lines
    assert any(line.startswith("ValueError: cannot apply sales\\n2026-01-01") for line in lines)
    assert any(line.startswith("KeyError: 'sales\\n2026") for line in lines)  # its repr escapes already
    assert "Traceback (most recent call last):" in lines


def test_logging_configured_while_stderr_was_swapped_writes_to_stderr_as_it_is_now(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI run in-process (a test runner's stand-in stderr, closed after the call) must not
    leave a handler writing to a closed stream: each record goes to the current ``sys.stderr``."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))  # restored after the test
    monkeypatch.setattr(root, "level", root.level)
    stand_in = io.StringIO()
    with monkeypatch.context() as swapped:
        swapped.setattr(sys, "stderr", stand_in)
        configure_logging("INFO", "text")
        logging.getLogger("streamer.test").warning("while swapped")
    stand_in.close()
    logging.getLogger("streamer.test").warning("after the stand-in closed")
    err = capfd.readouterr().err
    assert "Logging error" not in err and "after the stand-in closed" in err
