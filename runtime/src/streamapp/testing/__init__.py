"""Test a topology without a broker: ``TopologyTestDriver`` and its test input and output topics.

The public API of ``streamapp.testing`` (Kafka Streams' ``kafka-streams-test-utils``)::

    from streamapp.testing import TopologyTestDriver

    with TopologyTestDriver(builder, {"application.id": "app"}) as driver:
        flights = driver.create_input_topic("flights")            # serdes taken from the topology
        counts = driver.create_output_topic("departures-per-carrier")
        flights.pipe_input("N14228", {"carrier": "UA", "dep_time": 517}, timestamp_ms=1_000)
        assert counts.read_key_values_to_map() == {"UA": 1}
        assert driver.get_key_value_store("departures-per-carrier-store").get("UA") == 1

The driver runs the production processing core (stream thread, task manager, tasks, processors, stores)
over in-memory topics; see ``streamapp.testing.driver``.
"""

from streamapp.testing.driver import DEFAULT_APPLICATION_ID, TopologyTestDriver
from streamapp.testing.metrics import MetricName
from streamapp.testing.stores import KeyValueStoreView, SessionStoreView, WindowStoreView
from streamapp.testing.topics import EmptyTopicError, TestInputTopic, TestOutputTopic, TestRecord

__all__ = [
    "DEFAULT_APPLICATION_ID",
    "EmptyTopicError",
    "KeyValueStoreView",
    "MetricName",
    "SessionStoreView",
    "TestInputTopic",
    "TestOutputTopic",
    "TestRecord",
    "TopologyTestDriver",
    "WindowStoreView",
]
