"""The embedded Hive 2.3 metastore (PySpark's jars) is recognised as Hive 2.x by the API probe a dump
of transactional tables makes, and its connection stays usable after the probe's answer."""

from __future__ import annotations

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.metastore.thrift import HmsCatalog
from streamer.source.hive_version import probe
from streamer.source.hms_source_catalog import HmsSourceCatalog

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_the_hive_2_3_metastore_is_judged_by_transaction_ids(hms: EmbeddedMetastore) -> None:
    catalog = HmsCatalog(hms.uri)
    try:
        api = catalog.conn.call("probe", probe)
        assert not api.write_ids and api.family == "Hive 2.x"
        assert "type 1" in api.answer  # TApplicationException.UNKNOWN_METHOD, as Thrift writes it
        print(f"\nHive 2.3 getVersion answered {api.version!r}; the probe: {api.answer}")
        assert HmsSourceCatalog(catalog).metastore_api() == api  # through the dump's own path
        assert isinstance(catalog.list_databases(), list)  # the connection is in step after it
    finally:
        catalog.close()
