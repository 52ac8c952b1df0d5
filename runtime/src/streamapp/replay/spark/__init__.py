"""The replay's Spark side: every module of the replay that imports pyspark or pyarrow lives in this folder
(an import-linter contract fences them, ``.importlinter``), each small enough that a Spark Python worker which
unpickles one of its functions imports only what that function needs.

- ``write``: the final write, a Spark sort into the canonical order streamed into the transactional writers of
  ``streamapp.replay.output`` (ADR 0006).
"""
