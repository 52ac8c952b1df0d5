"""The commit metadata that carries emit-on-close close times (``streamapp.processing.commit_metadata``): small,
versioned JSON that reads back what was written; anything else reads as "no metadata" (the fallback), and a task's
partitions merge to the latest close time per store."""

from __future__ import annotations

import base64
import struct

from streamapp.processing.commit_metadata import MAX_METADATA_BYTES, decode_emitted, encode_emitted, merge_emitted


def test_close_times_read_back_as_written_in_small_versioned_json() -> None:
    text = encode_emitted({"b-store": 12_000, "a-store": 7_000})

    assert text == '{"v":1,"emit":{"a-store":7000,"b-store":12000}}'
    assert decode_emitted(text) == {"a-store": 7_000, "b-store": 12_000}


def test_a_store_that_emitted_nothing_is_left_out_and_reads_as_nothing_emitted() -> None:
    text = encode_emitted({"emitted": 5, "not-yet": -1})

    assert decode_emitted(text) == {"emitted": 5}
    assert decode_emitted(encode_emitted({"not-yet": -1})) == {}


def test_metadata_of_older_commits_other_versions_and_kafkas_layout_reads_as_none() -> None:
    kafkas = base64.b64encode(struct.pack(">bq", 2, 1_000)).decode()  # TopicPartitionMetadata: magic 2, time

    for found in (None, "", kafkas, '{"v":2,"emit":{"s":1}}', '{"v":1}', '{"v":1,"emit":{"s":"1"}}', "{not json"):
        assert decode_emitted(found) is None, found


def test_metadata_longer_than_the_brokers_default_limit_is_not_committed() -> None:
    stores = {f"store-{n:05}": n for n in range(MAX_METADATA_BYTES // 10)}

    assert encode_emitted(stores) is None


def test_a_tasks_partitions_merge_to_the_largest_close_time_per_store() -> None:
    older, newer = encode_emitted({"a": 5, "b": 9}), encode_emitted({"a": 8})

    assert merge_emitted([older, None, "", newer]) == {"a": 8, "b": 9}
    assert merge_emitted([None, ""]) is None
    assert merge_emitted([encode_emitted({})]) == {}
