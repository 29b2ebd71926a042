"""Errors of the Kafka layer, all under streamer's root exception."""

from __future__ import annotations

from streamer.errors import StreamerError


class BrokerError(StreamerError):
    """The embedded broker could not start, answer or stop; the message points at its log."""


class KafkaClientError(StreamerError):
    """A Kafka request failed or timed out; the message names the topic, partition and request."""


class KafkaUnreachableError(KafkaClientError):
    """No bootstrap server answered within the connect timeout; names the addresses and what to check.

    A ``KafkaClientError``: inside a running agent a broker outage is waited out like any other;
    a command's start-up check lets it end the command instead."""
