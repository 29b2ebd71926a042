"""``--metadata-only`` and ``--exclude-external-data`` through ``run_bootstrap`` (bundled warehouse, real
broker) and the applier (in-memory catalog, real files): the target has every table and partition,
and data files only where the seed carried them."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.events.model import BootstrapObjectPayload, Column, FileRef
from streamer.kafka.broker import EmbeddedBroker
from streamer.metastore.memory import MemoryCatalog
from streamer.source.agent import AgentConfig
from streamer.source.bootstrap_commands import run_bootstrap
from streamer.source.data_scope import DataScope
from streamer.source.enrich import EnrichSettings
from streamer.source.policy import PolicySet
from streamer.source.reader import SqlNotificationReader
from streamer.source.warehouse_catalog import WarehouseCatalog
from streamer.warehouse import Warehouse
from streamer.warehouse.files import CHECKSUM_ALGORITHM
from streamer.warehouse.workload import COLUMNS
from tests.integration.bootstrap.test_bootstrap_resume import _topic_events
from tests.unit.source.test_bootstrap_records import _applier, _run

pytestmark = pytest.mark.integration

ROW = [{"id": 1, "name": "x", "amount": 1.5, "ok": True}]


class _CountedListings(WarehouseCatalog):
    """The warehouse's catalog, counting which tables' files were listed."""

    listed: list[str]

    def files(self, db: str, table: str) -> list[FileRef]:
        self.listed.append(table)
        return super().files(db, table)


@pytest.mark.parametrize(("scope", "copied"), [
    (DataScope(metadata_only=True), set()),
    (DataScope(exclude_external_data=True), {"managed", "parted"}),
    (DataScope(), {"managed", "parted", "outside"}),
])
def test_a_seed_carries_the_data_its_scope_names(scope: DataScope, copied: set[str], broker: EmbeddedBroker,
                                                 topic: str, tmp_path: Path) -> None:
    url = str(tmp_path / "m.sqlite")
    wh = Warehouse.open(url, root=tmp_path / "wh", cmroot=tmp_path / "cm", source_id="seed")
    reader = SqlNotificationReader(url)
    try:
        wh.create_database("d")
        wh.create_table("d", "managed", COLUMNS)
        wh.create_table("d", "parted", COLUMNS, [Column("dt", "string")])
        wh.create_table("d", "outside", COLUMNS, external=True, location=tmp_path / "ext_src" / "outside")
        for name in ("managed", "outside"):
            wh.insert("d", name, ROW)
        wh.insert("d", "parted", ROW, {"dt": "1"})
        settings = EnrichSettings(checksum_algorithm=CHECKSUM_ALGORITHM, cmroot=str(tmp_path / "cm"))
        config = AgentConfig("seed", broker.client_settings(), topic=topic, enrich=settings)
        catalog = _CountedListings(wh)
        catalog.listed = []
        summary = run_bootstrap(config, reader, catalog, PolicySet.parse(["d"]), data=scope)
        assert set(catalog.listed) == copied  # withheld data is not even listed
        events = _topic_events(config)
        carried = {e.payload.table.name for e in events if isinstance(e.payload, BootstrapObjectPayload)
                   and e.payload.table is not None and e.payload.files}
        assert carried == copied, summary
        target = MemoryCatalog()
        applier, state = _applier(tmp_path / "target", target)
        _run(applier, state, [e for e in events if e.event_type.value.startswith("STREAMER_BOOTSTRAP")])
        assert sorted(target.list_tables("d")) == ["managed", "outside", "parted"]
        assert [p.values for p in target.list_partitions("d", "parted")] == [["1"]]
        landed = {name for name in ("managed", "parted", "outside")  # data, not streamer's own records
                  if any(f.is_file() and "_streamer" not in f.parts
                         for f in (tmp_path / "target").rglob(f"{name}/**/*"))}
        assert landed == copied
    finally:
        reader.close()
        wh.close()
