"""Kafka's default key partitioner over many keys at once: ``toPositive(murmur2(key)) % numPartitions``, vectorized.

The same function as ``streamapp.partitioner.partition_for_key`` (Java's ``Utils.murmur2``), computed with numpy
over all keys of one length together (unsigned 32-bit arithmetic wraps as Java's ``int`` does), so a native replay
stage pays a few numpy operations per batch instead of a Python loop per key. numpy comes with the replay extra
(``pyspark[sql]``); it is imported on first use, so the operator's plan checks need none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["partitions_for_keys"]

_SEED = 0x9747B28C
_M = 0x5BD1E995


def partitions_for_keys(keys: Sequence[bytes], num_partitions: int) -> list[int]:
    """The partition (0-based) Kafka's default partitioner picks for each serialized, non-null key, in order.

    Raises ValueError for ``num_partitions < 1``.
    """
    import numpy as np

    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    out = np.zeros(len(keys), dtype=np.int64)
    by_length: dict[int, list[int]] = {}
    for index, key in enumerate(keys):
        by_length.setdefault(len(key), []).append(index)
    for length, indexes in by_length.items():
        hashes = _murmur2_of_length(np, [keys[i] for i in indexes], length)
        out[np.asarray(indexes, dtype=np.int64)] = (hashes & 0x7FFFFFFF).astype(np.int64) % num_partitions
    return [int(p) for p in out]


def _murmur2_of_length(np: Any, keys: list[bytes], length: int) -> Any:
    """murmur2 (as unsigned 32-bit values) of ``keys``, all ``length`` bytes long."""
    m = np.uint32(_M)
    data = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), length)
    h = np.full(len(keys), (_SEED ^ length) & 0xFFFFFFFF, dtype=np.uint32)
    words = length // 4
    if words:
        blocks = np.ascontiguousarray(data[:, : words * 4]).view("<u4").reshape(len(keys), words)
        for j in range(words):
            k = blocks[:, j] * m
            k ^= k >> np.uint32(24)
            k *= m
            h = (h * m) ^ k
    tail, remainder = words * 4, length & 3
    if remainder == 3:
        h ^= data[:, tail + 2].astype(np.uint32) << np.uint32(16)
    if remainder >= 2:
        h ^= data[:, tail + 1].astype(np.uint32) << np.uint32(8)
    if remainder >= 1:
        h ^= data[:, tail].astype(np.uint32)
        h = h * m
    h ^= h >> np.uint32(13)
    h = h * m
    h ^= h >> np.uint32(15)
    return h
