package bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Arrays;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The benchmark's stream-table join on Kafka Streams, the same topology as bench/topologies.py "join": flights
 * (string key, JSON value) joined (inner) with the table of planes (string key, JSON value, a RocksDB store) on
 * the tail number -> the joiner of bench/functions.py with_plane (carrier, route, model, seats) -> output (JSON).
 * Kafka Streams' defaults, the record cache among them.
 *
 * <p>Arguments: planes-topic, then those of {@link KeyedCount}.
 */
public final class FlightsWithPlanes {
  private FlightsWithPlanes() {}

  static JsonNode withPlane(JsonNode flight, JsonNode plane) {
    ObjectNode out = JsonNodeFactory.instance.objectNode();
    out.set("carrier", flight.get("carrier"));
    out.put("route", flight.path("origin").asText() + "-" + flight.path("dest").asText());
    out.set("model", plane.has("model") ? plane.get("model") : null);
    out.set("seats", plane.has("seats") ? plane.get("seats") : null);
    return out;
  }

  public static void main(String[] args) throws InterruptedException {
    if (args.length < 8) {
      System.err.println(
          "usage: FlightsWithPlanes planes-topic bootstrap application-id flights-topic output guarantee"
              + " commit-interval-ms state-dir [cache-max-bytes]");
      System.exit(2);
    }
    String[] common = Arrays.copyOfRange(args, 1, args.length);
    StreamsBuilder builder = new StreamsBuilder();
    KTable<String, JsonNode> planes =
        builder.table(args[0], Consumed.with(Serdes.String(), new KeyedCount.JsonSerde()));
    builder.stream(common[2], Consumed.with(Serdes.String(), new KeyedCount.JsonSerde()))
        .join(planes, FlightsWithPlanes::withPlane)
        .to(common[3], Produced.with(Serdes.String(), new KeyedCount.JsonSerde()));
    KeyedCount.runUntilStopped(builder, KeyedCount.properties(common));
  }
}
