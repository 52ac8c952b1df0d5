"""MurmurHash3 x64 128-bit, as Kafka Streams' ``org.apache.kafka.streams.state.internals.Murmur3.hash128``.

The foreign-key join (KIP-213) sends this hash of the serialized left value with each subscription and drops a
response whose hash no longer matches the current left value (``streamapp.processors.joins.foreign_key``). The
hash is the ``mmh3`` library's (``hash64`` with ``x64arch``: the two 64-bit halves of MurmurHash3_x64_128, the
function Kafka's ``Murmur3.hash128`` ports).
"""

from __future__ import annotations

import struct

import mmh3

__all__ = ["DEFAULT_SEED", "hash128", "hash128_bytes"]

DEFAULT_SEED = 104729
"""Kafka's ``Murmur3.DEFAULT_SEED``."""


def hash128(data: bytes, seed: int = DEFAULT_SEED) -> tuple[int, int]:
    """The two 64-bit halves of ``data``'s hash as Java's signed ``long``s (Kafka's ``long[2]``). ``seed``: 0 to
    2^32 - 1 (Kafka's seeds are small positive ints)."""
    h1, h2 = mmh3.hash64(data, seed, x64arch=True, signed=True)
    return h1, h2


def hash128_bytes(data: bytes) -> bytes:
    """``hash128(data)`` as 16 bytes, the two longs big-endian (as Kafka's subscription wrappers write them)."""
    return struct.pack(">qq", *hash128(data))
