"""``streamapp reset`` refuses bad options with one clear error before it contacts Kafka (the broker address
here is unreachable on purpose: a test that got past the checks would fail on it)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from streamapp.cli import main

UNREACHABLE = ["--application-id", "shop", "--bootstrap-server", "127.0.0.1:1", "--input-topics", "events"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--to-earliest", "--to-offsets", "events:0=1"], "give one of --to-earliest, --to-offsets, not several"),
        (["--to-datetime", "2026-11-24T20:00:00"], "datetime 2026-11-24T20:00:00 has no time zone"),
        (["--to-datetime", "last week"], "'last week' is not an RFC 3339 time"),
        (["--to-offsets", "events:0"], "'events:0' is not topic:partition=offset"),
    ],
)
def test_a_bad_target_is_one_error_line(options: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["reset", *UNREACHABLE, *options])
    assert result.exit_code == 1
    assert f"Error: {message}" in result.output


def test_without_an_application_id_the_error_names_the_missing_key() -> None:
    result = CliRunner().invoke(main, ["reset", "--bootstrap-server", "127.0.0.1:1", "--input-topics", "events"])
    assert result.exit_code == 1
    assert "application.id" in result.output
    assert "--application-id" in result.output
