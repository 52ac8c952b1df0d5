"""Timestamped key-value stores (Kafka's KIP-258 ``TimestampedKeyValueStore``): each value kept with the
timestamp of the record that produced it, so KTable and aggregation results carry Kafka's result timestamps.

Formats, as in Kafka Streams:

- **store** (RocksDB / in-memory): ``timestamp (8 bytes, big-endian signed, epoch ms) + value bytes`` (Kafka's
  ``ValueAndTimestampSerializer`` / ``RocksDBTimestampedStore`` layout);
- **changelog**: unchanged, the plain value bytes, with the stored timestamp as the *record's* timestamp
  (Kafka's ``ChangeLoggingTimestampedKeyValueBytesStore``). A changelog written before this format existed
  therefore restores as is, each value getting its changelog record's timestamp.

Upgrade (Kafka's ``RocksDBTimestampedStore`` dual-column-family upgrade, done eagerly here): a persistent store
without the ``value.format = timestamped`` metadata marker holds plain values. On open it is converted in one
atomic write: every value gets the timestamp ``NO_TIMESTAMP`` (-1, Kafka's ``ConsumerRecord.NO_TIMESTAMP``,
what Kafka's upgrade path gives old entries), its changelog offset is kept, and the marker is set. An
aggregate read later with timestamp -1 takes the next record's timestamp (``max(record, -1)``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from streamapp.kafka.types import TopicPartition
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.stores import NO_TIMESTAMP, VALUE_TIMESTAMP, PersistentKeyValueStore
from streamapp.state.stores import decode_timestamped as decode
from streamapp.state.stores import encode_timestamped as encode

__all__ = [
    "FORMAT_MARKER_KEY",
    "NO_TIMESTAMP",
    "TIMESTAMPED_FORMAT",
    "TimestampedChangeLoggingKeyValueStore",
    "decode",
    "encode",
    "logged_store",
    "upgrade_to_timestamped",
]

FORMAT_MARKER_KEY = b"value.format"
"""Metadata key of a persistent store's value format; ``TIMESTAMPED_FORMAT`` once upgraded."""

TIMESTAMPED_FORMAT = b"timestamped"

log = logging.getLogger(__name__)


def upgrade_to_timestamped(store: PersistentKeyValueStore) -> int:
    """Convert a plain-value store to the timestamped format (values get ``NO_TIMESTAMP``) in one atomic write
    that keeps its changelog offset and sets the format marker; a store already marked is left alone.

    Returns the number of entries converted (0 for a new or already upgraded store).
    """
    if store.get_metadata(FORMAT_MARKER_KEY) == TIMESTAMPED_FORMAT:
        return 0
    batch: dict[bytes, bytes | None] = {key: encode(value, NO_TIMESTAMP) for key, value in store.items()}
    store.write(batch, store.changelog_offset(), metadata={FORMAT_MARKER_KEY: TIMESTAMPED_FORMAT})
    return len(batch)


class TimestampedChangeLoggingKeyValueStore(ChangeLoggingKeyValueStore):
    """A ``ChangeLoggingKeyValueStore`` whose values are ``encode(value, timestamp)`` bytes.

    ``put`` takes timestamped bytes; the changelog record gets the plain value and the entry's timestamp as
    its record timestamp (a tombstone: the timestamp of the record being processed). ``restore`` turns a
    changelog record back into ``encode(value, record timestamp)``. Open it with ``logged_store``, which
    first upgrades a plain-value store (``upgrade_to_timestamped``).
    """

    timestamped = True

    def _log_timestamp(self, value: bytes | None, timestamp: int) -> int:
        # every write: read the timestamp in place, without decode's copy of the value bytes
        return timestamp if value is None else int(VALUE_TIMESTAMP.unpack_from(value)[0])

    @staticmethod
    def _logged_value(value: bytes | None) -> bytes | None:
        return None if value is None else decode(value)[0]

    def restore(self, batch: Mapping[bytes, tuple[bytes | None, int]], last_offset: int) -> None:
        """Apply changelog records ``{key: (plain value, record timestamp)}`` read during restore."""
        self.inner.write(
            {key: None if value is None else encode(value, timestamp) for key, (value, timestamp) in batch.items()},
            last_offset,
        )


def logged_store(
    timestamped: bool,
    inner: PersistentKeyValueStore,
    changelog: TopicPartition,
    timestamp: Callable[[], int],
) -> ChangeLoggingKeyValueStore:
    """The changelogging layer of a task's store: timestamped (KIP-258; a plain-value store is upgraded first,
    ``upgrade_to_timestamped``) or plain."""
    if timestamped:
        upgraded = upgrade_to_timestamped(inner)
        if upgraded:
            log.info("Upgraded store %s to timestamped values: %d entries got timestamp -1", inner.name, upgraded)
        return TimestampedChangeLoggingKeyValueStore(inner, changelog, timestamp)
    return ChangeLoggingKeyValueStore(inner, changelog, timestamp)
