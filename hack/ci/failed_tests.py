"""Print the failed and errored tests of the last run, one line each, from ``.cache/ci/junit.xml``.

CI shows only the last lines of a run, after pytest's own summary; ``.ci/run`` calls this when ``make test`` fails
so that those last lines name what failed and why (the first line of the failure message). Standard library only:
it runs with whatever ``python3`` the machine has, also when the set-up failed before the virtualenv existed.

Usage: ``python3 hack/ci/failed_tests.py [JUNIT_XML]``; prints nothing when the file is missing.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def failed_tests(junit_xml: str) -> list[str]:
    """One line per failed or errored test case: ``FAILED <class>::<name> - <first message line>``."""
    lines = []
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        for outcome in ("failure", "error"):
            problem = case.find(outcome)
            if problem is not None:
                message = (problem.get("message") or problem.text or "").strip().splitlines()
                first = message[0][:300] if message else ""
                name = f"{case.get('classname', '')}::{case.get('name', '')}"
                lines.append(f"{'FAILED' if outcome == 'failure' else 'ERROR'} {name} - {first}")
    return lines


def main(argv: list[str]) -> int:
    path = Path(argv[1] if len(argv) > 1 else ".cache/ci/junit.xml")
    if not path.is_file():
        return 0
    found = failed_tests(str(path))
    if found:
        print(f"{len(found)} test(s) failed or errored in {path}:")
        print("\n".join(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
