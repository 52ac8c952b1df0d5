"""Conformance tests: each runs on the TopologyTestDriver and on the real broker (``harness``).

A package, so its modules import as ``conformance.<module>`` and never clash with same-named test helpers
elsewhere in ``runtime/tests`` (e.g. ``processing/harness.py``). User functions of conformance topologies
live in importable modules here (``conformance.seed_functions``): the broker engine's ``streamapp run``
process imports them by name.
"""
