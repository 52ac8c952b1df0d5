"""MurmurHash3 x64 128-bit, as Kafka Streams' ``org.apache.kafka.streams.state.internals.Murmur3.hash128``.

The foreign-key join (KIP-213) sends this hash of the serialized left value with each subscription and drops a
response whose hash no longer matches the current left value (``streamapp.processors.joins.foreign_key``). A
pure-Python copy (like ``streamapp.partitioner``'s murmur2): the join hashes one value per left update and one per
response.
"""

from __future__ import annotations

import struct

__all__ = ["DEFAULT_SEED", "hash128", "hash128_bytes"]

DEFAULT_SEED = 104729
"""Kafka's ``Murmur3.DEFAULT_SEED``."""

_MASK = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _fmix(value: int) -> int:
    value ^= value >> 33
    value = (value * 0xFF51AFD7ED558CCD) & _MASK
    value ^= value >> 33
    value = (value * 0xC4CEB9FE1A85EC53) & _MASK
    return value ^ (value >> 33)


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def hash128(data: bytes, seed: int = DEFAULT_SEED) -> tuple[int, int]:
    """The two 64-bit halves of ``data``'s hash as Java's signed ``long``s (Kafka's ``long[2]``)."""
    length = len(data)
    h1 = h2 = seed & _MASK
    blocks = length // 16
    for k1, k2 in struct.iter_unpack("<QQ", data[: blocks * 16]):
        k1 = (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK
        h1 = (((_rotl(h1 ^ k1, 27) + h2) & _MASK) * 5 + 0x52DCE729) & _MASK
        k2 = (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK
        h2 = (((_rotl(h2 ^ k2, 31) + h1) & _MASK) * 5 + 0x38495AB5) & _MASK
    tail = data[blocks * 16 :]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    return _signed(h1), _signed(h2)


def hash128_bytes(data: bytes) -> bytes:
    """``hash128(data)`` as 16 bytes, the two longs big-endian (as Kafka's subscription wrappers write them)."""
    return struct.pack(">qq", *hash128(data))
