"""Which Hive a source metastore is, as far as its ACID directories go: transaction ids or write ids.

Hive 2.x names a transactional table's ``base_N``/``delta_X_Y`` directories by transaction ids;
Hive 3.0 and later (HIVE-18192, "per-table write ids") name them by per-table write ids, which are
unrelated numbers: judging a Hive 3 layout by the metastore's transaction list copies the wrong
directories without any error. The version is decided by the API, not by a version string: fb303's
``getVersion`` is a constant in Hive 2.x's ``HMSHandler`` (it answers ``"3.0"``), so it cannot tell
2.3 from 3.1. What can is ``get_valid_write_ids``, the call Hive 3 added to serve per-table write id
lists: a Hive 2.x server has no such method and answers with Thrift's ``TApplicationException``
``UNKNOWN_METHOD``, which every Thrift server writes for a name its processor lacks. Any other answer
(a reply, or an error raised *inside* the method) means the method exists: write ids.

``probe`` makes that one call (an empty request: no table, no transaction list) on a connection;
``uses_write_ids`` is the decision, pure; ``refusal`` is the one-line error a dump raises for a Hive 3+
transactional table (this streamer reads Hive 2.x transaction ids only; see docs/design/source.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from thrift.protocol.TProtocol import TProtocolBase
from thrift.Thrift import TApplicationException, TMessageType, TType

from streamer.metastore.thrift import ThriftConnection

log = logging.getLogger(__name__)

PROBE_METHOD = "get_valid_write_ids"
"""A Hive 3.0+ metastore method (``ThriftHiveMetastore.get_valid_write_ids``) absent from Hive 2.x."""


@dataclass(frozen=True)
class MetastoreApi:
    """What the source metastore's API says about its ACID layout."""

    write_ids: bool  # True: Hive 3.0+ (directories named by per-table write ids)
    version: str = ""  # fb303 getVersion's answer, for messages only (Hive 2.x answers "3.0")
    answer: str = ""  # how the probe was answered, for messages

    @property
    def family(self) -> str:
        return "Hive 3.0 or later" if self.write_ids else "Hive 2.x"


def uses_write_ids(message_type: int, exception_type: int | None) -> bool:
    """Whether a metastore that answered the probe with ``message_type`` (and, for an exception, the
    ``TApplicationException`` type) has Hive 3's write id API: only "unknown method" says no."""
    unknown = exception_type == TApplicationException.UNKNOWN_METHOD
    return not (message_type == TMessageType.EXCEPTION and unknown)


def describe(message_type: int, exception_type: int | None, text: str = "") -> str:
    """The probe's answer in words (for logs and errors)."""
    if message_type == TMessageType.EXCEPTION:
        return f"TApplicationException type {exception_type}" + (f": {text}" if text else "")
    return "a reply"


def write_probe(oprot: TProtocolBase, seqid: int) -> None:
    """The ``get_valid_write_ids`` call with ``GetValidWriteIdsRequest{fullTableNames: [],
    validTxnList: ""}`` (field ids of Hive 3's hive_metastore.thrift)."""
    oprot.writeMessageBegin(PROBE_METHOD, TMessageType.CALL, seqid)
    oprot.writeStructBegin("get_valid_write_ids_args")
    oprot.writeFieldBegin("rqst", TType.STRUCT, 1)
    oprot.writeStructBegin("GetValidWriteIdsRequest")
    oprot.writeFieldBegin("fullTableNames", TType.LIST, 1)
    oprot.writeListBegin(TType.STRING, 0)
    oprot.writeListEnd()
    oprot.writeFieldEnd()
    oprot.writeFieldBegin("validTxnList", TType.STRING, 2)
    oprot.writeString("")
    oprot.writeFieldEnd()
    oprot.writeFieldStop()
    oprot.writeStructEnd()
    oprot.writeFieldEnd()
    oprot.writeFieldStop()
    oprot.writeStructEnd()
    oprot.writeMessageEnd()
    oprot.trans.flush()


def read_answer(iprot: TProtocolBase) -> tuple[int, int | None, str]:
    """(message type, exception type or None, exception text) of the probe's answer, read whole."""
    _name, mtype, _seqid = iprot.readMessageBegin()
    if mtype == TMessageType.EXCEPTION:
        exc = TApplicationException()
        exc.read(iprot)
        iprot.readMessageEnd()
        return mtype, exc.type, str(exc.message or "")
    iprot.skip(TType.STRUCT)
    iprot.readMessageEnd()
    return mtype, None, ""


def probe(client: Any) -> MetastoreApi:
    """Ask a metastore client (a generated ``ThriftHiveMetastore.Client``) which API it has."""
    write_probe(client._oprot, client._seqid)
    mtype, exc_type, text = read_answer(client._iprot)
    try:
        version = str(client.getVersion())
    except Exception:  # the version string is only shown, never decided on
        version = ""
    return MetastoreApi(uses_write_ids(mtype, exc_type), version, describe(mtype, exc_type, text))


def ask(conn: ThriftConnection) -> MetastoreApi:
    """``probe`` over a metastore connection (reconnecting once, errors named), logged."""
    api = conn.call("metastore API version", probe)
    log.info("the source metastore is %s (getVersion %r; %s answered %s)", api.family, api.version,
             PROBE_METHOD, api.answer)
    return api


def refusal(obj: str, api: MetastoreApi) -> str:
    """The one-line reason a dump refuses a transactional table of a write-id (Hive 3+) source."""
    shown = f" (getVersion {api.version!r})" if api.version else ""
    return (
        f"transactional table {obj}: the source metastore is {api.family}{shown}, which answers "
        f"{PROBE_METHOD} ({api.answer}), so its base_/delta_ directories are named by per-table write ids; "
        "this streamer chooses them by Hive 2.x transaction ids and refuses rather than dump them wrong: "
        "exclude the table from the policy (its non-transactional tables are dumped as usual)"
    )
