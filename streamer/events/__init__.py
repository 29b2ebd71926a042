"""The event contract (``model``) and its Avro wire format (``codec``, schemas in ``schemas/``).

Import from the submodules: ``streamer.events.model`` for the dataclasses, ``streamer.events.codec``
for ``EventSerializer`` / ``EventDeserializer`` / ``encode_event`` / ``decode_event``. This package
imports nothing itself, so using the model does not load fastavro. Design: docs/design/events.md.
"""
