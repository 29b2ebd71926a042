"""The event contract: one envelope for every change a source makes, with typed payloads.

These frozen dataclasses are what every part of streamer speaks: the Hive decoder produces them, the
agent publishes them (Avro, see ``schemas/``), the target plans and applies them. They live in
``snapshots``, ``payloads`` and ``envelope``; import them from here. See docs/design/events.md.
"""

from __future__ import annotations

# Star imports re-export exactly the ``__all__`` of each module, so the names are listed once, where defined.
from streamer.events import envelope, payloads, snapshots
from streamer.events.envelope import *  # noqa: F403
from streamer.events.payloads import *  # noqa: F403
from streamer.events.snapshots import *  # noqa: F403

__all__ = [*snapshots.__all__, *payloads.__all__, *envelope.__all__]
