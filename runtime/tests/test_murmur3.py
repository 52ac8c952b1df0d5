"""``streamapp.murmur3``: the foreign-key join's value hash is Kafka's ``Murmur3.hash128`` (MurmurHash3 x64 128)."""

from __future__ import annotations

from streamapp.murmur3 import DEFAULT_SEED, hash128, hash128_bytes

FOX = b"The quick brown fox jumps over the lazy dog"


def test_hash128_matches_the_reference_murmurhash3_x64_128() -> None:
    """The reference implementation's digest of FOX with seed 0 is 6c1b07bc7bbc4be347939ac4a93c437a: its first
    8 bytes, little-endian, are h1."""
    h1, h2 = hash128(FOX, 0)
    digest = h1.to_bytes(8, "little", signed=True) + h2.to_bytes(8, "little", signed=True)
    assert digest.hex() == "6c1b07bc7bbc4be347939ac4a93c437a"
    assert hash128(b"", 0) == (0, 0)


def test_every_tail_length_changes_the_hash_and_the_seed_is_kafkas() -> None:
    """Inputs of 0..33 bytes cover every tail length of both 8-byte halves; each prefix hashes differently."""
    hashes = {hash128(FOX[:n]) for n in range(34)}
    assert len(hashes) == 34
    assert DEFAULT_SEED == 104729
    assert hash128(FOX) != hash128(FOX, 0)


def test_hash128_bytes_is_both_longs_big_endian() -> None:
    h1, h2 = hash128(FOX)
    assert hash128_bytes(FOX) == h1.to_bytes(8, "big", signed=True) + h2.to_bytes(8, "big", signed=True)
