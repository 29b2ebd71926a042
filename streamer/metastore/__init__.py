"""Metastore clients, used by the source (bootstrap, policy changes) and the target alike.

Owns the ``Catalog`` protocol (``catalog``), its Thrift implementation against a Hive Metastore
(``thrift_catalog``, over ``transport``: plain, SASL or Kerberos), an in-memory one for pure tests
(``memory_catalog``) and the mapping between streamer's snapshots and Hive's Thrift objects
(``convert``). May import ``errors``, ``events``, ``hive``; nothing of ``source`` or ``target``.
"""
