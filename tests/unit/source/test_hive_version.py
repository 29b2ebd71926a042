"""The source metastore's ACID API (Hive 2.x transaction ids or Hive 3+ write ids), decided from the
wire answer to ``get_valid_write_ids``: answers written with Apache Thrift's own protocol classes as a
Hive 2.x server (``TApplicationException`` UNKNOWN_METHOD, what Thrift's ``TBaseProcessor`` writes for a
method it lacks) and a Hive 3 server (a reply holding ``GetValidWriteIdsResponse``) send them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType, TType
from thrift.transport.TTransport import TMemoryBuffer

from streamer.source.hive_version import PROBE_METHOD, MetastoreApi, probe, refusal, uses_write_ids


def _exception(kind: int, message: str) -> bytes:
    """A ``TApplicationException`` answer to the probe, as Thrift's processor writes it."""
    buf = TMemoryBuffer()
    out = TBinaryProtocol(buf)
    out.writeMessageBegin(PROBE_METHOD, TMessageType.EXCEPTION, 0)
    TApplicationException(kind, message).write(out)
    out.writeMessageEnd()
    return buf.getvalue()


def _hive2_answer() -> bytes:
    return _exception(TApplicationException.UNKNOWN_METHOD, f"Invalid method name: '{PROBE_METHOD}'")


def _hive3_answer() -> bytes:
    """``get_valid_write_ids_result{0: success GetValidWriteIdsResponse{1: tblValidWriteIds []}}``."""
    buf = TMemoryBuffer()
    out = TBinaryProtocol(buf)
    out.writeMessageBegin(PROBE_METHOD, TMessageType.REPLY, 0)
    out.writeStructBegin("get_valid_write_ids_result")
    out.writeFieldBegin("success", TType.STRUCT, 0)
    out.writeStructBegin("GetValidWriteIdsResponse")
    out.writeFieldBegin("tblValidWriteIds", TType.LIST, 1)
    out.writeListBegin(TType.STRUCT, 0)
    out.writeListEnd()
    out.writeFieldEnd()
    out.writeFieldStop()
    out.writeStructEnd()
    out.writeFieldEnd()
    out.writeFieldStop()
    out.writeStructEnd()
    out.writeMessageEnd()
    return buf.getvalue()

def _hive3_internal_error() -> bytes:
    """A Hive 3 server whose handler failed on the empty request: the method exists all the same."""
    return _exception(TApplicationException.INTERNAL_ERROR, "Internal error processing")

class _Client:
    """A generated client's protocol pair over memory: the request is kept, the answer scripted."""

    def __init__(self, answer: bytes, version: str = "3.0") -> None:
        self.sent = TMemoryBuffer()
        self._oprot = TBinaryProtocol(self.sent)
        self._iprot = TBinaryProtocol(TMemoryBuffer(answer))
        self._seqid = 0
        self.version = version

    def getVersion(self) -> str:  # fb303's name
        return self.version

def test_a_hive2_metastore_lacks_the_method_and_is_judged_by_transaction_ids() -> None:
    client = _Client(_hive2_answer())
    api = probe(client)
    assert api == MetastoreApi(False, "3.0", f"TApplicationException type 1: Invalid method name: "
                                              f"'{PROBE_METHOD}'")
    assert api.family == "Hive 2.x"
    assert client._iprot.trans.read(1) == b""  # the answer was read whole: the connection stays usable

def test_a_hive3_metastore_answers_and_uses_write_ids() -> None:
    for answer in (_hive3_answer(), _hive3_internal_error()):
        client = _Client(answer, version="3.1.3")
        api = probe(client)
        assert api.write_ids and api.family == "Hive 3.0 or later"
        assert client._iprot.trans.read(1) == b""

def test_the_probe_is_a_well_formed_call_of_get_valid_write_ids() -> None:
    client = _Client(_hive2_answer())
    probe(client)
    got = TBinaryProtocol(TMemoryBuffer(client.sent.getvalue()))
    name, mtype, _ = got.readMessageBegin()
    assert (name, mtype) == (PROBE_METHOD, TMessageType.CALL)
    got.readStructBegin()
    _, ftype, fid = got.readFieldBegin()
    assert (ftype, fid) == (TType.STRUCT, 1)
    got.readStructBegin()
    _, ftype, fid = got.readFieldBegin()
    assert (ftype, fid) == (TType.LIST, 1)
    assert got.readListBegin() == (TType.STRING, 0)
    got.readFieldEnd()
    _, ftype, fid = got.readFieldBegin()
    assert (ftype, fid, got.readString()) == (TType.STRING, 2, "")

@given(st.sampled_from([TMessageType.REPLY, TMessageType.EXCEPTION]), st.none() | st.integers(0, 12))
def test_only_an_unknown_method_means_hive2(mtype: int, exc_type: int | None) -> None:
    hive2 = mtype == TMessageType.EXCEPTION and exc_type == TApplicationException.UNKNOWN_METHOD
    assert uses_write_ids(mtype, exc_type) is not hive2

def test_the_refusal_is_one_line_naming_table_and_reason() -> None:
    text = refusal("sales.orders", MetastoreApi(True, "3.1.3", "a reply"))
    assert "\n" not in text
    assert text.startswith("transactional table sales.orders: the source metastore is Hive 3.0 or later")
    assert "write ids" in text and "exclude the table" in text
