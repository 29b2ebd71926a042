"""Metastore clients, used by the source (bootstrap, policy changes) and the target alike.

Owns the ``Catalog`` protocol (``catalog``) and its two backends, each one class: ``thrift``
(``HmsCatalog`` against a Hive Metastore over ``transport``: plain, SASL or Kerberos; with the
mapping between streamer's snapshots and Hive's Thrift objects, ``thrift.convert``) and ``memory``
(``MemoryCatalog`` for pure tests); design: docs/design/metastore.md.
May import ``errors``, ``events``, ``hive``; nothing of ``source`` or ``target``.
"""
