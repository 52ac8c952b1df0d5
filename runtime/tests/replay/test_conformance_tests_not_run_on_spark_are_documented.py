"""docs/replay.md names every conformance test that does not run on Spark, and only those: the strict expected
failures of ``SPARK_UNSUPPORTED`` and the driver-only tests (no ``engine`` parameter), each in its own table.

No Spark and no broker: the conformance modules are imported and their test functions' signatures read.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

from conformance.spark_unsupported import SPARK_UNSUPPORTED

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs" / "replay.md"
CONFORMANCE = REPO / "runtime" / "tests" / "conformance"
SECTION = "## Conformance tests not run on Spark"
EXPECTED_FAILURES = "### Strict expected failures on Spark"
DRIVER_ONLY = "### Driver only (no `engine`)"


def conformance_tests() -> dict[str, bool]:
    """``{test name: whether it takes the engine fixture}`` of every ``test_*`` function in the conformance suite."""
    tests: dict[str, bool] = {}
    for path in sorted(CONFORMANCE.glob("test_*.py")):
        module = importlib.import_module(f"conformance.{path.stem}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("test_") and function.__module__ == module.__name__:
                tests[name] = "engine" in inspect.signature(function).parameters
    return tests


def documented(heading: str) -> set[str]:
    """The test names in the first column of the table under ``heading`` of the section ``SECTION``."""
    text = DOCS.read_text()
    assert SECTION in text, f"docs/replay.md has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    assert heading in section, f"docs/replay.md's {SECTION!r} has no {heading!r}"
    table = section.split(heading, 1)[1].split("\n### ", 1)[0]
    return set(re.findall(r"^\| `(test_\w+)` \|", table, flags=re.MULTILINE))


def test_every_spark_unsupported_test_exists_and_takes_the_engine_fixture() -> None:
    tests = conformance_tests()

    assert {name for name in SPARK_UNSUPPORTED if not tests.get(name, False)} == set()


def test_the_docs_list_exactly_the_spark_unsupported_tests() -> None:
    assert documented(EXPECTED_FAILURES) == set(SPARK_UNSUPPORTED)


def test_the_docs_list_exactly_the_driver_only_conformance_tests() -> None:
    driver_only = {name for name, takes_engine in conformance_tests().items() if not takes_engine}

    assert driver_only, "the conformance suite was not found"
    assert documented(DRIVER_ONLY) == driver_only
