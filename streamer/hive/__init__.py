"""Hive knowledge: notification-log messages, Thrift objects as TJSON, file URIs, partition names.

Pure code: decoders turn stored ``NOTIFICATION_LOG`` rows into :mod:`streamer.events.model` events
and encoders write the exact rows a Hive 4 metastore would, for the bundled source warehouse.
"""
