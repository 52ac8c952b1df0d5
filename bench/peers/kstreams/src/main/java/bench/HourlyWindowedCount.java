package bench;

import java.time.Duration;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The benchmark's hourly windowed count on Kafka Streams, the same topology as bench/topologies.py "windowed":
 * flights (string key, JSON value) -> groupByKey -> hourly tumbling windows with 1 h grace -> count in a RocksDB
 * window store -> toStream -> output (time-windowed string key, the count as a JSON number). The store keeps its
 * windows for 365 days (issue 22's setting): with the default retention (size + grace = 2 h) each 1 h segment is
 * a RocksDB instance of its own, opened and dropped for every hour of the nine years of event time, where
 * streamapp's segments are key prefixes in one store. Kafka Streams' defaults otherwise, the record cache among
 * them.
 *
 * <p>Arguments: those of {@link KeyedCount}.
 */
public final class HourlyWindowedCount {
  private HourlyWindowedCount() {}

  static final long HOUR_MS = 3_600_000L;

  public static void main(String[] args) throws InterruptedException {
    if (args.length < 7) {
      System.err.println(
          "usage: HourlyWindowedCount bootstrap application-id input output guarantee commit-interval-ms"
              + " state-dir [cache-max-bytes]");
      System.exit(2);
    }
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(args[2], Consumed.with(Serdes.String(), new KeyedCount.JsonSerde()))
        .groupByKey()
        .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(HOUR_MS), Duration.ofMillis(HOUR_MS)))
        .count(
            Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("hourly-store")
                .withRetention(Duration.ofDays(365)))
        .toStream()
        .to(
            args[3],
            Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, HOUR_MS), KeyedCount.LONG_TEXT));
    KeyedCount.runUntilStopped(builder, KeyedCount.properties(args));
  }
}
