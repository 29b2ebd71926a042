"""schemas/*.avsc: generated from the dataclasses, in sync with them, and stable on the wire."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from fastavro import parse_schema

from streamer.errors import ConfigError
from streamer.events.avro import avro_name, to_avro
from streamer.events.model import PAYLOAD_TYPES, DropTablePayload, Event, EventType, Source
from streamer.events.schema_gen import archive_current, drift, main, record_schemas, write_schemas
from streamer.events.schemas import (
    SCHEMAS_DIR_ENV,
    WriterSchema,
    load_event_schema,
    load_writer_schemas,
    schema_fingerprint,
    schemas_dir,
)

CURRENT_FINGERPRINT = "d0ba1511897efc13"
PIN_HELP = (
    "The wire format changed. Run `python -m streamer.events.schema_gen --archive` on the *old* schemas "
    "(it keeps them in schemas/history/ so records already on the topic stay readable), then regenerate "
    "and update CURRENT_FINGERPRINT."
)


def test_committed_schemas_match_the_dataclasses() -> None:
    assert drift(schemas_dir()) == [], "schemas/ is stale: run `python -m streamer.events.schema_gen`"


def test_fingerprint_is_pinned() -> None:
    assert load_event_schema().fingerprint.hex() == CURRENT_FINGERPRINT, PIN_HELP


def test_crc64_avro_matches_the_spec_test_vector() -> None:
    # From the Avro specification's test suite: the fingerprint of "null", as a signed 64-bit long.
    fingerprint = schema_fingerprint(parse_schema("null"))
    assert int.from_bytes(fingerprint, "little", signed=True) == 7195948357588979594


def test_fingerprint_ignores_docs_and_formatting() -> None:
    current = load_event_schema()
    schema = json.loads(current.json)
    schema["doc"] = "another doc"
    schema["fields"][0]["doc"] = "a field doc"
    assert WriterSchema.from_json(json.dumps(schema, indent=4)).fingerprint == current.fingerprint


def test_payload_is_a_union_of_every_payload_record_by_name() -> None:
    event = record_schemas()[avro_name(Event)]
    fields = {f["name"]: f for f in event["fields"]}
    assert fields["payload"]["type"] == [avro_name(p) for p in PAYLOAD_TYPES]
    assert fields["event_type"]["type"] == "string"
    assert event["namespace"] == "io.streamer.events"


def test_optional_fields_are_null_unions_defaulting_to_null() -> None:
    checked = 0
    for schema in record_schemas().values():
        for field in schema["fields"]:
            if isinstance(field["type"], list) and field["type"][0] == "null" and "default" in field:
                assert field["default"] is None
                checked += 1
    assert checked > 50


def test_dataclass_defaults_become_avro_defaults() -> None:
    schemas = record_schemas()
    for name, schema in schemas.items():
        cls = {avro_name(c): c for c in _model_classes()}[name]
        defaults = {
            f.name
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        }
        assert {f["name"] for f in schema["fields"] if "default" in f} == defaults, name


def _model_classes() -> list[type]:
    import streamer.events.model as model

    return [c for c in vars(model).values() if isinstance(c, type) and dataclasses.is_dataclass(c)]


def test_union_payload_is_written_in_tuple_notation() -> None:
    datum = to_avro(Event(Source("s", 1, 1), EventType.DROP_TABLE, DropTablePayload()))
    assert datum["payload"] == (avro_name(DropTablePayload), {"table": None})
    assert datum["event_type"] == "DROP_TABLE"


def test_generated_files_load_from_an_overridden_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good, broken = tmp_path / "good", tmp_path / "broken"
    write_schemas(good)
    write_schemas(broken)
    monkeypatch.setenv(SCHEMAS_DIR_ENV, str(good))
    assert schemas_dir() == good
    assert load_event_schema().fingerprint.hex() == CURRENT_FINGERPRINT
    assert main(["--check", "--dir", str(good)]) == 0
    (broken / "io.streamer.events.Column.avsc").unlink()
    assert drift(broken) == ["missing io.streamer.events.Column.avsc"]
    assert main(["--check", "--dir", str(broken)]) == 1
    with pytest.raises(ConfigError, match=r"io\.streamer\.events\.Column.*schema_gen"):
        load_event_schema(broken)


def test_archived_schemas_are_known_writers(tmp_path: Path) -> None:
    write_schemas(tmp_path)
    archived = archive_current(tmp_path)
    assert archived.name == f"{CURRENT_FINGERPRINT}.avsc"
    older = json.loads(archived.read_text())
    older["fields"] = [f for f in older["fields"] if f["name"] != "ts_ms"]
    (tmp_path / "history" / "older.avsc").write_text(json.dumps(older))
    known = load_writer_schemas(tmp_path)
    assert len(known) == 2
    assert bytes.fromhex(CURRENT_FINGERPRINT) in known


def test_an_insert_written_before_unlocated_existed_reads_as_located() -> None:
    """Records of the schema before ``InsertPayload.unlocated`` (archived) still decode: the field
    takes its default, false."""
    import io

    from fastavro import schemaless_writer

    from streamer.events.codec import SINGLE_OBJECT_MARKER, EventDeserializer
    from streamer.events.model import InsertPayload
    from streamer.events.schemas import WriterSchema, schemas_dir

    older = WriterSchema.from_json((schemas_dir() / "history" / "c12b86360b31f288.avsc").read_text())
    payload = InsertPayload(None, None, [], False, [])
    event = Event(Source("s", 7, 0), EventType.INSERT, payload, db="d", table="t")
    datum = to_avro(event)
    name, fields = datum["payload"]
    datum["payload"] = (name, {k: v for k, v in fields.items() if k != "unlocated"})
    out = io.BytesIO()
    schemaless_writer(out, older.parsed, datum)
    decoded = EventDeserializer()(SINGLE_OBJECT_MARKER + older.fingerprint + out.getvalue())
    assert isinstance(decoded.payload, InsertPayload) and decoded.payload.unlocated is False
    assert decoded == event
