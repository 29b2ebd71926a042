"""The target job: the Spark Structured Streaming query that feeds micro-batches to the applier.

Owns the query and its settings (``streaming``, ``settings``), the checkpoint reading
(``checkpoint``), apply lanes and their runner (``lanes``, ``lane_runner``), bounded runs
(``bounded``), the published watermark (``watermark``), copies on executors (``executor_copy``) and
the external tables' directory sync (``external_sync``). May import everything below it in
``target`` (``state``, ``apply``, ``table_reader``, ``dr``).
"""
