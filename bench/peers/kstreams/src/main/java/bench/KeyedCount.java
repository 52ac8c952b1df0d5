package bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The benchmark's keyed count on Kafka Streams, the same topology as bench/topologies.py "count": flights (string
 * key, JSON value, parsed as streamapp parses it) -> groupByKey -> count in a RocksDB key-value store -> toStream
 * -> output (the count as a JSON number). Kafka Streams' defaults apply, the record cache among them
 * (statestore.cache.max.bytes, 10 MiB), unless --cache-max-bytes is given.
 *
 * <p>Arguments: bootstrap application-id input output guarantee commit-interval-ms state-dir [cache-max-bytes].
 * Runs until SIGTERM (KafkaStreams.close from a shutdown hook).
 */
public final class KeyedCount {
  private KeyedCount() {}

  /** JSON values as Jackson trees: the work streamapp's json serde does per record. */
  static final class JsonSerde implements Serde<JsonNode> {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    @Override
    public Serializer<JsonNode> serializer() {
      return (topic, node) -> {
        try {
          return node == null ? null : MAPPER.writeValueAsBytes(node);
        } catch (IOException e) {
          throw new IllegalStateException(e);
        }
      };
    }

    @Override
    public Deserializer<JsonNode> deserializer() {
      return (topic, bytes) -> {
        try {
          return bytes == null ? null : MAPPER.readTree(bytes);
        } catch (IOException e) {
          throw new IllegalStateException(e);
        }
      };
    }
  }

  public static void main(String[] args) throws InterruptedException {
    if (args.length < 7) {
      System.err.println(
          "usage: KeyedCount bootstrap application-id input output guarantee commit-interval-ms state-dir"
              + " [cache-max-bytes]");
      System.exit(2);
    }
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(args[2], Consumed.with(Serdes.String(), new JsonSerde()))
        .groupByKey()
        .count(Materialized.as("count-store"))
        .toStream()
        .to(args[3], Produced.with(Serdes.String(), LONG_TEXT));
    runUntilStopped(builder, properties(args));
  }

  /** A long as its decimal text (the JSON number streamapp's json serde writes). */
  static final Serde<Long> LONG_TEXT =
      Serdes.serdeFrom(
          (topic, count) -> count == null ? null : Long.toString(count).getBytes(StandardCharsets.UTF_8),
          (topic, bytes) -> bytes == null ? null : Long.parseLong(new String(bytes, StandardCharsets.UTF_8)));

  /**
   * The streams config shared by the benchmark apps, from their common arguments: bootstrap application-id input
   * output guarantee commit-interval-ms state-dir [cache-max-bytes]. One stream thread, earliest offsets.
   */
  static Properties properties(String[] args) {
    Properties props = new Properties();
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[4]);
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args[5]);
    props.put(StreamsConfig.STATE_DIR_CONFIG, args[6]);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    props.put("consumer.auto.offset.reset", "earliest");
    if (args.length > 7) {
      props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, Long.parseLong(args[7]));
    }
    return props;
  }

  /** Runs the topology until SIGTERM (KafkaStreams.close from a shutdown hook). */
  static void runUntilStopped(StreamsBuilder builder, Properties props) throws InterruptedException {
    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  streams.close();
                  stopped.countDown();
                }));
    streams.start();
    stopped.await();
  }
}
