"""Applying events: plan a micro-batch (pure), then change the target catalog and files.

Owns the planner (``plan``), the applier (``Applier``: one step at a time, idempotent, progress in
``repl.last.id``), the plan runner (``runner``), the event handlers on their ``ApplyContext`` and what
they need: verified file copies (``files``), target locations (``paths``), atomic directory swaps
(``swap``), function resources and bootstrap records. May import ``target.state``, ``metastore``,
``events``, ``hive``; not ``target.job`` or ``target.dr``. Design: docs/design/apply.md.
"""
