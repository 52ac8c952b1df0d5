from clickstream import topology
from streamapp.testing import TopologyTestDriver


def counts(build, output, views):
    """(key, window start, count) of every update `build`'s topology writes to `output` for `views`."""
    with TopologyTestDriver(build()) as driver:
        clicks = driver.create_input_topic("clicks")
        out = driver.create_output_topic(output)
        for user, page, agent, ts in views:
            clicks.pipe_input(user, {"page": page, "agent": agent, "ts": ts})
        return [(r.key.key, r.key.start, r.value) for r in out.read_records_to_list()]


def test_bots_are_dropped_and_humans_counted_per_minute():
    views = [
        ("ann", "/Home/", "Firefox", 1_000),
        ("ann", "/cart?x=1", "Firefox", 30_000),
        ("crawler", "/", "Googlebot", 31_000),
        ("ann", "/", "Firefox", 61_000),
    ]
    assert counts(topology.build, "clicks-per-user-minute", views) == [
        ("ann", 0, 1),
        ("ann", 0, 2),
        ("ann", 60_000, 1),
    ]


def test_v2_counts_normalised_pages_and_users_as_v1_does():
    views = [("ann", "/Cart/", "Firefox", 1_000), ("bob", "/cart?ref=ad", "Safari", 2_000)]
    assert counts(topology.build_v2, "clicks-per-page-minute", views) == [("/cart", 0, 1), ("/cart", 0, 2)]
    assert counts(topology.build_v2, "clicks-per-user-minute", views) == [("ann", 0, 1), ("bob", 0, 1)]
