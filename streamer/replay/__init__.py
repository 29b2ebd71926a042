"""The source's table states replayed from its events, as a perfect replica would hold them.

Owns ``state`` (comparable table states: metadata that matters, files with checksums, committed
write ids), ``live`` (a table's mutable state during a replay) and ``machine``
(``SourceStateMachine``: events in, states out). Pure. ``target.dr`` (verify, drift) compares
replicas with it; ``testing`` builds its consistency checker on it. May import ``events`` and
``hive`` only.
"""
