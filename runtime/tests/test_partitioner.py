"""murmur2 and the key partitioner agree bit for bit with Kafka's Java client (and librdkafka)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamapp.partitioner import murmur2, partition_for_key, to_positive

# org.apache.kafka.common.utils.UtilsTest#testMurmur2 (apache/kafka, clients/src/test/java).
JAVA_UTILS_TEST_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

# librdkafka src/rdmurmur2.c unittest_murmur2 ("java_murmur2_results", checked against Java's output):
# every tail length 0..3 and both aligned and unaligned inputs.
LIBRDKAFKA_VECTORS = [
    (b"kafka", 0xD067CF64),
    (b"giberish123456789", 0x8F552B0C),
    (b"1234", 0x9FC97B14),
    (b"234", 0xE7C009CA),
    (b"34", 0x873930DA),
    (b"4", 0x5A4B5CA1),
    (b"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x78424F1C),
    (b"reAmbleWillBeRemoved,ThePrePartThatIs", 0x4A62B377),
    (b"eAmbleWillBeRemoved,ThePrePartThatIs", 0xE0E4E09E),
    (b"AmbleWillBeRemoved,ThePrePartThatIs", 0x62B8B43F),
    (b"", 0x106E08D9),
]


@pytest.mark.parametrize(("key", "expected"), JAVA_UTILS_TEST_VECTORS)
def test_murmur2_matches_kafkas_java_utils_murmur2(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "unsigned"), LIBRDKAFKA_VECTORS)
def test_murmur2_matches_librdkafkas_java_compatible_vectors(key: bytes, unsigned: int) -> None:
    assert murmur2(key) & 0xFFFFFFFF == unsigned


@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_32_bit_java_int(key: bytes) -> None:
    assert -(2**31) <= murmur2(key) < 2**31


def test_to_positive_clears_the_sign_bit_like_java() -> None:
    assert to_positive(-973932308) == 1173551340
    assert to_positive(-(2**31)) == 0
    assert to_positive(479470107) == 479470107


@pytest.mark.parametrize(
    ("key", "partitions", "expected"),
    # toPositive(murmur2(key)) % n, with murmur2 from the vectors above.
    [
        (b"21", 3, 1173551340 % 3),
        (b"foobar", 10, (-790332482 & 0x7FFFFFFF) % 10),
        (b"abc", 7, 479470107 % 7),
        (b"kafka", 1, 0),
    ],
)
def test_partition_for_key_is_positive_murmur2_modulo_partition_count(
    key: bytes, partitions: int, expected: int
) -> None:
    assert partition_for_key(key, partitions) == expected


@given(st.binary(max_size=32), st.integers(min_value=1, max_value=1000))
def test_partition_for_key_is_always_a_valid_partition(key: bytes, partitions: int) -> None:
    assert 0 <= partition_for_key(key, partitions) < partitions


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="num_partitions must be at least 1, got 0"):
        partition_for_key(b"k", 0)


def test_partition_for_key_agrees_with_librdkafkas_murmur2_random_partitioner() -> None:
    """Produce through librdkafka's own partitioner (to its in-process mock cluster) and compare partitions.

    The mock cluster auto-creates the topic with its default partition count (read back from metadata).
    """
    from confluent_kafka import Producer

    producer = Producer({"test.mock.num.brokers": 1, "partitioner": "murmur2_random", "log_level": 0})
    keys = [f"N{n * 7919 % 100000}".encode() for n in range(300)] + [b"", b"UA", "Zürich".encode()]
    delivered: dict[bytes, int] = {}

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        delivered[msg.key()] = msg.partition()  # type: ignore[attr-defined]

    for key in keys:
        producer.produce("keys", key=key, value=b"v", on_delivery=on_delivery)
    assert producer.flush(30) == 0
    partitions = len(producer.list_topics("keys", timeout=10).topics["keys"].partitions)

    assert partitions > 1
    assert delivered == {key: partition_for_key(key, partitions) for key in keys}
