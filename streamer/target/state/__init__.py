"""What a target knows about itself between batches and across restarts.

Owns the state directory: ``state_file`` (per-database progress kept off the catalog, halts),
``chain`` (the event-id chain anchor that detects records lost from the topic), ``status`` (what
``streamer status`` reports), ``visibility`` (committed write ids of ACID replicas) and
``dir_option`` (the shared ``--state-dir`` flag). May import ``metastore``, ``events``, ``kafka``;
nothing else of ``target``.
"""
