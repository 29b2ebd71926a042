"""The metastore connection speaks Thrift's binary protocol through its C codec (``fastbinary``):
the same bytes and the same Python values as the pure-Python protocol, for Hive's own classes."""

from __future__ import annotations

from hmsclient.genthrift.hive_metastore import ttypes as tt
from thrift.protocol import TBinaryProtocol
from thrift.transport import TTransport


def _table() -> tt.Table:
    sd = tt.StorageDescriptor(
        cols=[tt.FieldSchema(name="prénom", type="string", comment="名前")],
        location="file:///wh/d.db/t", serdeInfo=tt.SerDeInfo(parameters={"k": "v"}), parameters={},
    )
    return tt.Table(tableName="tâble", dbName="d", sd=sd, parameters={"ключ": "значение"},
                    partitionKeys=[tt.FieldSchema(name="p", type="string")], tableType="MANAGED_TABLE",
                    createTime=1_700_000_000)


def _encode(table: tt.Table, protocol: type) -> bytes:
    buf = TTransport.TMemoryBuffer()
    table.write(protocol(buf))
    return buf.getvalue()


def _decode(data: bytes, protocol: type) -> tt.Table:
    table = tt.Table()
    table.read(protocol(TTransport.TMemoryBuffer(data)))
    return table


def test_the_c_codec_writes_and_reads_what_the_pure_python_one_does() -> None:
    pure, fast = TBinaryProtocol.TBinaryProtocol, TBinaryProtocol.TBinaryProtocolAccelerated
    assert fast(TTransport.TMemoryBuffer())._fast_decode is not None  # the C extension is there
    table = _table()
    assert _encode(table, fast) == _encode(table, pure)
    decoded = _decode(_encode(table, pure), fast)
    assert decoded == table == _decode(_encode(table, fast), pure)
    assert isinstance(decoded.tableName, str) and decoded.parameters == {"ключ": "значение"}

