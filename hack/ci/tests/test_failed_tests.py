"""The CI recap names every failed and errored test with its message's first line, and nothing when all passed."""

from __future__ import annotations

from pathlib import Path

from hack.ci.failed_tests import failed_tests

_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="e2e.test_flights" name="test_scale_out">
<failure message="assert 370000 == 336776&#10;more">tb</failure></testcase>
<testcase classname="runtime.tests.test_ok" name="test_passes"/>
<testcase classname="operator.tests.test_x" name="test_fixture">
<error message="fixture 'kafka' broke">tb</error></testcase>
<testcase classname="runtime.tests.test_skip" name="test_skipped"><skipped message="no spark"/></testcase>
</testsuite></testsuites>
"""


def test_the_recap_names_failures_and_errors_with_their_first_message_line(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(_JUNIT)
    assert failed_tests(str(junit)) == [
        "FAILED e2e.test_flights::test_scale_out - assert 370000 == 336776",
        "ERROR operator.tests.test_x::test_fixture - fixture 'kafka' broke",
    ]
