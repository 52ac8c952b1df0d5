"""The replay's Spark side: the modules of the replay that run in Spark's Python workers or build Spark plans, each
small enough that a worker which unpickles one of its functions imports only what that function needs.

- ``source``: the reads, bounded offset ranges consumed with the runtime's Kafka client, classified (and folded,
  ``streamapp.replay.spark.folds``) in the reading worker for the native counts;
- ``write``: the final write, a Spark sort into the canonical order streamed into the transactional writers of
  ``streamapp.replay.output`` (ADR 0006).
"""
