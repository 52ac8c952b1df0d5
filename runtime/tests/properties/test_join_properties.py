"""Stream-stream joins against a batch reference model over random out-of-order inputs (hypothesis).

Guarantee: when no record is more than ``grace`` out of order (``ts > stream time - grace`` on arrival),
the join's output, once stream time has passed every window, is exactly the batch join: every pair with
``right.ts - left.ts`` in ``[-before, after]`` once, at the later timestamp; for left/outer joins every
left (and for outer every right) record without a partner once, joined with ``None``, at its own
timestamp. Nothing is emitted twice or both matched and unmatched.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from join_helpers import committer, stream_stream_join
from streamapp.state.changelogging import ChangeLoggingKeyValueStore

Record = tuple[str, str, int, int]  # side ("l" / "r"), key, value (unique id), timestamp (ms)


def reference(join: str, records: list[Record], before: int, after: int) -> Counter[tuple[Any, ...]]:
    lefts = [r for r in records if r[0] == "l"]
    rights = [r for r in records if r[0] == "r"]
    out: Counter[tuple[Any, ...]] = Counter()
    matched: set[int] = set()
    for _, lkey, lval, lts in lefts:
        for _, rkey, rval, rts in rights:
            if lkey == rkey and -before <= rts - lts <= after:
                out[(lkey, (lval, rval), max(lts, rts))] += 1
                matched.update((lval, rval))
    if join in ("left", "outer"):
        out.update((k, (v, None), ts) for _, k, v, ts in lefts if v not in matched)
    if join == "outer":
        out.update((k, (None, v), ts) for _, k, v, ts in rights if v not in matched)
    return out


def on_time(raw: list[tuple[str, str, int]], grace: int) -> list[Record]:
    """Keep records no more than ``grace`` out of order (strictly), numbering values uniquely."""
    kept: list[Record] = []
    stream_time = -1
    for i, (side, key, ts) in enumerate(raw):
        if stream_time < 0 or ts > stream_time - grace:
            kept.append((side, key, i, ts))
            stream_time = max(stream_time, ts)
    return kept


@settings(max_examples=300, deadline=None)
@given(
    join=st.sampled_from(["inner", "left", "outer"]),
    before=st.integers(0, 8),
    after=st.integers(0, 8),
    grace=st.integers(0, 12),
    raw=st.lists(st.tuples(st.sampled_from(["l", "r"]), st.sampled_from(["a", "b"]), st.integers(0, 40)), max_size=30),
    commits=st.sets(st.integers(0, 30)),
)
def test_stream_stream_join_equals_the_batch_join(
    join: str, before: int, after: int, grace: int, raw: list[tuple[str, str, int]], commits: set[int]
) -> None:
    """``commits``: after which records the stores commit (buffered writes applied), as a task does."""
    records = on_time(raw, grace)
    stores: list[ChangeLoggingKeyValueStore] = []
    processor, out, _ = stream_stream_join(join, before, after, grace, logged_stores=stores)
    commit = committer(stores)
    for i, (side, key, value, ts) in enumerate(records):
        processor.for_input(side).process(key, value, ts)
        if i in commits:
            commit()
    # far enough ahead that every window (and its grace) has closed
    flush_ts = max([ts for *_, ts in records], default=0) + before + after + grace + 1
    processor.for_input("l").process("flush", -1, flush_ts)
    emitted = Counter((k, tuple(v), ts) for k, v, ts in out.records if k != "flush")
    assert emitted == reference(join, records, before, after)
