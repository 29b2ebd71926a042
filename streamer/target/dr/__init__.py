"""Disaster-recovery operations on a replica: verify, drift, failover, failback.

Owns ``verify`` (compare a replica with the source at its ``repl.last.id``; ``--repair``) with
``observe`` (the replica as a client reads it), ``drift`` (the source's state at a cut, from the
topic), ``failover`` / ``failback`` and their commands (``commands``); design: docs/design/dr.md.
May import ``target.state``, ``target.apply``, ``target.table_reader``, ``replay``, ``metastore``;
not ``target.job`` (which imports this).
"""
