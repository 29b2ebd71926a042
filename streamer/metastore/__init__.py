"""Metastore clients, used by the source (bootstrap, policy changes) and the target alike.

Owns the ``Catalog`` protocol (``catalog``), its Thrift implementation against a Hive Metastore
(``thrift_catalog`` and its ``thrift_*`` parts, over ``transport``: plain, SASL or Kerberos), an
in-memory one for pure tests (``memory_catalog`` and its ``memory_*`` parts) and the mapping between
streamer's snapshots and Hive's Thrift objects (``convert``); design: docs/design/metastore.md.
May import ``errors``, ``events``, ``hive``; nothing of ``source`` or ``target``.
"""
