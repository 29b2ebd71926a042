"""The Thrift reader against a real metastore: the embedded HMS (Hive 2.3) on PostgreSQL.

The server serves whatever rows sit in its database's NOTIFICATION_LOG, so the test writes rows
there (Hive 2.3 columns: no CAT_NAME) and reads them back over Thrift.
"""

from typing import Any

import pytest

from streamer.errors import EventGapError
from streamer.source.gaps import ContiguousReader
from streamer.source.thrift_reader import ThriftNotificationReader

pytestmark = pytest.mark.integration


def _pg_conninfo(hms: Any) -> str:
    jdbc = hms._settings.jdbc_url  # the fixture's database; the server exposes no public accessor
    return "postgresql://" + jdbc.split("//", 1)[1].split("?")[0] + f"?user={hms._settings.jdbc_user}"


def test_reads_rows_written_to_the_metastore_database(hms_postgres: Any) -> None:
    import psycopg

    reader = ThriftNotificationReader(hms_postgres.uri)
    try:
        base = reader.head_event_id()  # also makes DataNucleus create its notification tables
        reader.read_after(base, 1)
        with psycopg.connect(_pg_conninfo(hms_postgres), autocommit=True) as conn:
            nl_base = conn.execute('SELECT COALESCE(MAX("NL_ID"), 0) FROM "NOTIFICATION_LOG"').fetchone()
            for i in range(1, 6):
                conn.execute(
                    'INSERT INTO "NOTIFICATION_LOG" ("NL_ID", "EVENT_ID", "EVENT_TIME", "EVENT_TYPE", '
                    '"DB_NAME", "TBL_NAME", "MESSAGE", "MESSAGE_FORMAT") '
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (nl_base[0] + i, base + i, 1700000000 + i, "CREATE_TABLE", "sales", f"t{i}",
                     '{"db":"sales"}', "json-0.2"),
                )
        rows = reader.read_after(base, 3)
        assert [r.event_id for r in rows] == [base + 1, base + 2, base + 3]
        assert (rows[0].event_type, rows[0].db_name, rows[0].table_name) == ("CREATE_TABLE", "sales", "t1")
        assert rows[0].message == '{"db":"sales"}' and rows[0].message_format == "json-0.2"
        assert [r.event_id for r in reader.read_after(base + 3, 10)] == [base + 4, base + 5]

        with psycopg.connect(_pg_conninfo(hms_postgres), autocommit=True) as conn:
            conn.execute('DELETE FROM "NOTIFICATION_LOG" WHERE "EVENT_ID" = %s', (base + 2,))
        with pytest.raises(EventGapError):
            ContiguousReader(reader, settle_seconds=0.01).read_after(base + 1, 10)
    finally:
        reader.close()
