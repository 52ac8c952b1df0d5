package bench;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.processor.TimestampExtractor;

/**
 * The late-drop benchmark's topology on Kafka Streams (bench/late_drops.py): page views (string key, JSON value,
 * event time from the value's "ts" field) -> selectKey(country) -> groupByKey (a repartition topic) -> hourly
 * tumbling windows with a grace -> count -> toStream -> output (time-windowed string key, long count). One stream
 * thread, Kafka Streams' defaults otherwise.
 *
 * <p>Arguments: bootstrap application-id input output commit-interval-ms state-dir window-ms grace-ms. Runs until
 * SIGTERM; before closing it prints one line "LATE-DROPS dropped=&lt;n&gt; processed=&lt;n&gt;": the sum over
 * tasks of the task metrics dropped-records-total and process-total (stream-task-metrics).
 */
public final class WindowedCountAfterRepartition {
  private WindowedCountAfterRepartition() {}

  /** Event time from the JSON value's "ts" (milliseconds); the record's timestamp when there is none. */
  public static final class TsExtractor implements TimestampExtractor {
    @Override
    public long extract(ConsumerRecord<Object, Object> record, long partitionTime) {
      Object value = record.value();
      if (value instanceof JsonNode node && node.hasNonNull("ts")) {
        return node.get("ts").asLong();
      }
      return record.timestamp();
    }
  }

  static double taskMetricTotal(KafkaStreams streams, String name) {
    double total = 0;
    for (Map.Entry<MetricName, ? extends Metric> entry : streams.metrics().entrySet()) {
      MetricName metric = entry.getKey();
      if (metric.group().equals("stream-task-metrics") && metric.name().equals(name)) {
        Object value = entry.getValue().metricValue();
        if (value instanceof Number number) {
          total += number.doubleValue();
        }
      }
    }
    return total;
  }

  public static void main(String[] args) throws InterruptedException {
    if (args.length < 8) {
      System.err.println(
          "usage: WindowedCountAfterRepartition bootstrap application-id input output commit-interval-ms"
              + " state-dir window-ms grace-ms");
      System.exit(2);
    }
    long windowMs = Long.parseLong(args[6]);
    long graceMs = Long.parseLong(args[7]);
    Properties props = new Properties();
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args[4]);
    props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    props.put("consumer.auto.offset.reset", "earliest");
    props.put(StreamsConfig.METRICS_RECORDING_LEVEL_CONFIG, "DEBUG"); // process-total is a DEBUG task metric
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(
            args[2],
            Consumed.with(Serdes.String(), new KeyedCount.JsonSerde()).withTimestampExtractor(new TsExtractor()))
        .selectKey((user, view) -> view.path("country").asText())
        .groupByKey(Grouped.with("per-country", Serdes.String(), new KeyedCount.JsonSerde()))
        .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(windowMs), Duration.ofMillis(graceMs)))
        .count(Materialized.as("hourly-views"))
        .toStream()
        .to(
            args[3],
            Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, windowMs), Serdes.Long()));
    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  System.out.printf(
                      "LATE-DROPS dropped=%d processed=%d%n",
                      (long) taskMetricTotal(streams, "dropped-records-total"),
                      (long) taskMetricTotal(streams, "process-total"));
                  System.out.flush();
                  streams.close();
                  stopped.countDown();
                }));
    streams.start();
    stopped.await();
  }
}
