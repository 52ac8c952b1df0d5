"""``KafkaConsumer.commit`` under KIP-848: a commit the coordinator rejects with ``STALE_MEMBER_EPOCH`` while it moves
the member to a new epoch is retried (as Java's ``CommitRequestManager`` does), not reported as a rebalance; every
other rebalance error still is, at once. The librdkafka consumer is replaced by a scripted one behind the adapter;
the same race on the broker: ``runtime/tests/integration/test_commits_survive_members_joining_and_leaving.py``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from streamapp.kafka import clients
from streamapp.kafka.clients import KafkaConsumer
from streamapp.kafka.types import CommitFailedError, KafkaClientError, TopicPartition


class ScriptedConsumer:
    """Answers each ``commit`` with the next error code of ``script`` (None: success)."""

    def __init__(self, script: list[int | None]) -> None:
        self.script: Iterator[int | None] = iter(script)
        self.commits = 0

    def commit(self, offsets: list[Any], asynchronous: bool) -> list[Any]:
        assert asynchronous is False
        self.commits += 1
        code = next(self.script)
        if code is not None:
            raise KafkaException(KafkaError(code))
        return offsets

    def close(self) -> None:
        pass


def consumer_with(script: list[int | None]) -> tuple[KafkaConsumer, ScriptedConsumer]:
    consumer = KafkaConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "group.protocol": "consumer"})
    consumer._consumer.close()
    scripted = ScriptedConsumer(script)
    consumer._consumer = scripted  # type: ignore[assignment]
    return consumer, scripted


OFFSETS = {TopicPartition("in", 0): 42}
STALE = KafkaError.STALE_MEMBER_EPOCH


def test_a_stale_member_epoch_is_retried_until_the_commit_succeeds() -> None:
    consumer, scripted = consumer_with([STALE, STALE, None])
    consumer.commit(OFFSETS)
    assert scripted.commits == 3
    assert consumer.stale_epoch_retries == 2


def test_an_epoch_that_stays_stale_fails_as_a_rebalance_after_the_retry_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clients, "STALE_EPOCH_RETRY_S", 0.3)
    consumer, scripted = consumer_with([STALE] * 1_000)
    with pytest.raises(CommitFailedError, match="member epoch stayed stale"):
        consumer.commit(OFFSETS)
    assert 2 <= scripted.commits < 1_000


@pytest.mark.parametrize(
    "code", [KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID, KafkaError.FENCED_INSTANCE_ID]
)
def test_other_rebalance_errors_fail_the_commit_at_once(code: int) -> None:
    consumer, scripted = consumer_with([code, None])
    with pytest.raises(CommitFailedError, match="group rebalanced"):
        consumer.commit(OFFSETS)
    assert scripted.commits == 1


def test_a_broker_error_is_not_a_rebalance() -> None:
    consumer, _ = consumer_with([KafkaError.GROUP_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaClientError) as raised:
        consumer.commit(OFFSETS)
    assert not isinstance(raised.value, CommitFailedError)
