"""librdkafka's own log lines (a FAIL line per connection attempt to an unreachable broker: the audit counted
639 a minute for one app) reach the operator's log through a rate-limited logger: at most ``LOG_BURST`` lines per
admin client a minute, the rest counted in one warning. No broker is needed: 127.0.0.1:1 refuses at once."""

from __future__ import annotations

import logging
import time

import pytest
from streamapp_operator.kafka import LOG_BURST, ConfluentKafkaAdmin, KafkaUnavailable, RateLimitedLog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_becomes_the_burst_and_one_line_saying_how_many_were_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    log = RateLimitedLog("kafka.invalid:9092", logging.getLogger("test.librdkafka"), burst=10, window=60, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="test.librdkafka"):
        for attempt in range(639):  # one minute of an unreachable broker, as audited
            clock.now = attempt * 60 / 639
            log.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", f"Connect failed {attempt}")
        assert len(caplog.records) == 10
        assert caplog.records[0].getMessage() == "FAIL [rdkafka#producer-1] Connect failed 0"
        clock.now = 61.0
        log.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", "Connect failed again")
    summary, line = caplog.records[-2:]
    assert (summary.levelno, summary.getMessage()) == (
        logging.WARNING,
        "librdkafka (kafka.invalid:9092): left out 629 more lines of the last 61s (at most 10 a window)",
    )
    assert line.getMessage() == "FAIL [rdkafka#producer-1] Connect failed again"


def test_a_quiet_client_loses_no_line_and_says_nothing_extra(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = RateLimitedLog("kafka:9092", logging.getLogger("test.quiet"), burst=10, window=60, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="test.quiet"):
        for minute in range(3):
            clock.now = minute * 60.0
            log.log(logging.WARNING, "%s", f"line {minute}")
    assert [r.getMessage() for r in caplog.records] == ["line 0", "line 1", "line 2"]


def test_the_admin_client_logs_through_the_limit_and_never_to_stderr(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """librdkafka writes to stderr by itself: with the logger, its lines wait for a poll and go through the limit."""
    with caplog.at_level(logging.DEBUG, logger="streamapp_operator.librdkafka"):
        admin = ConfluentKafkaAdmin("127.0.0.1:1", timeout=1)
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            with pytest.raises(KafkaUnavailable):
                admin.partition_counts(["flights"])
        del admin
    lines = [r for r in caplog.records if r.name == "streamapp_operator.librdkafka"]
    assert 0 < len(lines) <= LOG_BURST
    assert any("127.0.0.1:1" in r.getMessage() for r in lines)
    assert "127.0.0.1:1" not in capfd.readouterr().err
