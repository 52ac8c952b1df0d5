"""Timestamp extractors of source nodes (record, value field, custom, wall clock) and their onInvalid rules."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from streamapp.processing.timestamps import InvalidTimestampError, build_extractor
from streamapp.topology.timestamps import TimestampExtractorSpec


def spec(**fields: object) -> TimestampExtractorSpec:
    return TimestampExtractorSpec.model_validate(fields)


def clock() -> int:
    return 42


def test_record_timestamp_is_the_default() -> None:
    assert build_extractor(None, clock).extract("k", {}, 1_000, -1) == 1_000


def test_field_in_iso8601_epoch_ms_and_epoch_s() -> None:
    iso = build_extractor(spec(type="field", field="at", format="iso8601"), clock)
    assert iso.extract(None, {"at": "2013-01-01T05:15:00Z"}, 0, -1) == 1_357_017_300_000
    assert iso.extract(None, {"at": "2013-01-01T05:15:00"}, 0, -1) == 1_357_017_300_000  # naive = UTC
    nested = build_extractor(spec(type="field", field="time.ms"), clock)
    assert nested.extract(None, {"time": {"ms": 123}}, 0, -1) == 123
    seconds = build_extractor(spec(type="field", field="t", format="epoch_s"), clock)
    assert seconds.extract(None, {"t": 1.5}, 0, -1) == 1_500


def test_custom_function_gets_key_value_record_timestamp_and_partition_time() -> None:
    extractor = build_extractor(spec(type="custom", function="timestamp_functions:later_of"), clock)
    assert extractor.extract("k", {"t": 5}, 7, 9) == 9


def test_wall_clock() -> None:
    assert build_extractor(spec(type="wall_clock"), clock).extract(None, None, 1, -1) == 42


def test_invalid_timestamps_fail_by_default_naming_the_field() -> None:
    extractor = build_extractor(spec(type="field", field="at", format="iso8601"), clock)
    with pytest.raises(InvalidTimestampError, match="field 'at' as iso8601"):
        extractor.extract(None, {"at": "yesterday"}, 0, -1)
    with pytest.raises(InvalidTimestampError, match="negative timestamp"):
        build_extractor(None, clock).extract(None, None, -1, -1)


def test_on_invalid_skip_and_partition_time() -> None:
    skip = build_extractor(spec(type="field", field="at", on_invalid="skip"), clock)
    assert skip.extract(None, {}, 0, 100) is None
    previous = build_extractor(spec(type="field", field="at", on_invalid="partition_time"), clock)
    assert previous.extract(None, {}, 0, 100) == 100
    assert previous.extract(None, {}, 0, -1) is None  # no partition time yet: skipped


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"type": "field"}, "needs 'field'"),
        ({"type": "custom"}, "needs 'function'"),
        ({"type": "record", "field": "x"}, "takes no 'field'"),
        ({"type": "record", "onInvalid": "ignore"}, "on_invalid|onInvalid"),
    ],
)
def test_spec_validation(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TimestampExtractorSpec.model_validate(fields)
