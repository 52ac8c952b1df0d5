"""The StreamApp benchmark (issue 3, "Performance"): ``python -m bench.run`` (``make bench``).

A benchmark, not a test: it measures and prints, it asserts nothing about speed. ``docs/benchmarks.md``
holds the method, the numbers and the profile findings.
"""
