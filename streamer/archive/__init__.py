"""The event archive: a topic kept past Kafka's retention as Avro Object Container Files.

``streamer archive run`` consumes a source's topic and writes it, one file per range of records, into
a directory or object store (``manifest``, ``ocf``, ``store``, ``archiver``); ``streamer load``
applies an archive with no broker through the target job's own batch applier (``load``). Every file
is checked against the manifest and the event chain before anything from it is applied
(``verify``). The manifest's schema and the runbook: docs/dr.md.
"""
