"""Kafka's default key partitioner: ``toPositive(murmur2(key)) % numPartitions``.

A pure-Python copy of Java's ``Utils.murmur2`` and ``BuiltInPartitioner.partitionForKey``, so a key lands
on the same partition whether a Java client, Kafka Streams, Spark or this runtime writes it. Producers of
the runtime configure librdkafka's ``partitioner=murmur2_random`` (same function for non-null keys); this
module is the reference the runtime and its tests use to compute partitions without a producer.
"""

from __future__ import annotations

__all__ = ["murmur2", "partition_for_key", "to_positive"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """32-bit murmur2 of ``data`` as Java's signed ``int`` (in [-2**31, 2**31)), exactly ``Utils.murmur2``."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    remainder = length & 3
    if remainder == 3:
        h ^= data[tail + 2] << 16
    if remainder >= 2:
        h ^= data[tail + 1] << 8
    if remainder >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit of a 32-bit int (``number & 0x7fffffff``)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition (0-based) Kafka's default partitioner picks for a serialized, non-null key.

    Raises ValueError for ``num_partitions < 1``; a null key has no key-based partition (Kafka spreads
    such records), so ``key`` must be bytes.
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
