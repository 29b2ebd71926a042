"""Kafka plumbing: embedded broker, client settings, topic helpers and the Spark streaming source.

Imports stay lazy (nothing here pulls in Spark or starts a broker) so that `streamer --help` and the
pure modules remain cheap to load.
"""
