package jetlet.nexmark.hazelcast;

import com.hazelcast.function.ComparatorEx;
import com.hazelcast.jet.Traversers;
import com.hazelcast.jet.aggregate.AggregateOperations;
import com.hazelcast.jet.datamodel.KeyedWindowResult;
import com.hazelcast.jet.datamodel.Tuple2;
import com.hazelcast.jet.pipeline.Pipeline;
import com.hazelcast.jet.pipeline.StreamStage;
import com.hazelcast.jet.pipeline.WindowDefinition;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static com.hazelcast.jet.pipeline.Sinks.list;

/**
 * The NEXMark queries on Jet's Pipeline API, each ending in an IList of canonical rows (Object[],
 * the fields of bench/nexmark_peers.ROW_FIELDS in order), and {@link #canonical} which applies the
 * comparison rules that need the whole output (windows still open at the end, last value per key).
 */
final class Queries {
    static final Set<String> NAMES = Set.of("q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q13");
    private static final long AUCTION_SKIP = 123;
    private static final Set<String> Q3_STATES = Set.of("OR", "ID", "CA");
    private static final long Q3_CATEGORY = 10;
    private static final int SIDE_INPUT_SIZE = 500;

    private Queries() {
    }

    /** The pipeline of {@code query} over the first {@code count} events, into IList {@code results}. */
    static Pipeline pipeline(String query, long count, long windowMs, long slideMs, String results) {
        Pipeline pipeline = Pipeline.create();
        StreamStage<Object> events = pipeline.readFrom(GeneratorP.source(count)).withNativeTimestamps(0);
        StreamStage<Object[]> rows = switch (query) {
            case "q0" -> events.map(Queries::q0Row);
            case "q1" -> bids(events).map(b -> new Object[] {b.auction(), b.bidder(), b.price() * 89 / 100,
                b.dateTime(), b.extra()});
            case "q2" -> bids(events).filter(b -> b.auction() % AUCTION_SKIP == 0)
                .map(b -> new Object[] {b.auction(), b.price()});
            case "q3" -> q3(events);
            case "q4" -> WinningBids.q4(events, Generator.timestamp(count - 1));
            case "q5" -> q5(bids(events), windowMs, slideMs);
            case "q6" -> WinningBids.q6(events, Generator.timestamp(count - 1));
            case "q7" -> q7(bids(events), windowMs);
            case "q8" -> q8(events, windowMs);
            case "q13" -> q13(bids(events));
            default -> throw new IllegalArgumentException("unknown query " + query);
        };
        rows.writeTo(list(results));
        return pipeline;
    }

    static StreamStage<Events.Bid> bids(StreamStage<Object> events) {
        return events.filter(Events.Bid.class::isInstance).map(Events.Bid.class::cast);
    }

    static StreamStage<Events.Auction> auctions(StreamStage<Object> events) {
        return events.filter(Events.Auction.class::isInstance).map(Events.Auction.class::cast);
    }

    static StreamStage<Events.Person> persons(StreamStage<Object> events) {
        return events.filter(Events.Person.class::isInstance).map(Events.Person.class::cast);
    }

    private static Object[] q0Row(Object event) {
        if (event instanceof Events.Person p) {
            return new Object[] {"person", p.id(), p.name(), p.emailAddress(), p.creditCard(), p.city(), p.state(),
                null, null, null, null, null, null, null, null, null, null, null, null, p.dateTime(), p.extra()};
        }
        if (event instanceof Events.Auction a) {
            return new Object[] {"auction", a.id(), null, null, null, null, null, a.itemName(), a.description(),
                a.initialBid(), a.reserve(), a.expires(), a.seller(), a.category(), null, null, null, null, null,
                a.dateTime(), a.extra()};
        }
        Events.Bid b = (Events.Bid) event;
        return new Object[] {"bid", null, null, null, null, null, null, null, null, null, null, null, null, null,
            b.auction(), b.bidder(), b.price(), null, null, b.dateTime(), b.extra()};
    }

    /** Persons of OR/ID/CA joined with their category-10 auctions: keyed state, unbounded. */
    private static StreamStage<Object[]> q3(StreamStage<Object> events) {
        StreamStage<Object> wanted = events.filter(e -> e instanceof Events.Person p && Q3_STATES.contains(p.state())
            || e instanceof Events.Auction a && a.category() == Q3_CATEGORY);
        return wanted.groupingKey(e -> e instanceof Events.Person p ? p.id() : ((Events.Auction) e).seller())
            .flatMapStateful(Q3State::new, (state, key, event) -> Traversers.traverseIterable(state.accept(event)));
    }

    /** Q3's state per person id: the person once seen, and the auctions that came before it. */
    static final class Q3State {
        private Events.Person person;
        private final List<Events.Auction> waiting = new ArrayList<>();

        List<Object[]> accept(Object event) {
            if (event instanceof Events.Person p) {
                person = p;
                List<Object[]> rows = waiting.stream().map(this::row).toList();
                waiting.clear();
                return rows;
            }
            Events.Auction auction = (Events.Auction) event;
            if (person == null) {
                waiting.add(auction);
                return List.of();
            }
            return List.<Object[]>of(row(auction));
        }

        private Object[] row(Events.Auction auction) {
            return new Object[] {person.name(), person.city(), person.state(), auction.id()};
        }
    }

    /** Bids per auction in sliding windows, then the top auction (most bids, then higher id) per window. */
    private static StreamStage<Object[]> q5(StreamStage<Events.Bid> bids, long windowMs, long slideMs) {
        ComparatorEx<KeyedWindowResult<Long, Long>> byCount = ComparatorEx.comparing(KeyedWindowResult::result);
        return bids.window(WindowDefinition.sliding(windowMs, slideMs))
            .groupingKey(Events.Bid::auction)
            .aggregate(AggregateOperations.counting())
            .window(WindowDefinition.tumbling(slideMs))
            .aggregate(AggregateOperations.maxBy(byCount.thenComparing(KeyedWindowResult::key)))
            .map(top -> new Object[] {top.result().end(), top.result().key(), top.result().result()});
    }

    /** The highest bid, by (price, auction, bidder, date_time), of each tumbling window. */
    private static StreamStage<Object[]> q7(StreamStage<Events.Bid> bids, long windowMs) {
        ComparatorEx<Events.Bid> order = ComparatorEx.comparingLong(Events.Bid::price)
            .thenComparingLong(Events.Bid::auction)
            .thenComparingLong(Events.Bid::bidder)
            .thenComparingLong(Events.Bid::dateTime);
        return bids.window(WindowDefinition.tumbling(windowMs))
            .aggregate(AggregateOperations.maxBy(order))
            .map(w -> new Object[] {w.end(), w.result().auction(), w.result().bidder(), w.result().price(),
                w.result().dateTime()});
    }

    /** Persons who opened an auction in the same tumbling window: a windowed co-group by person id. */
    private static StreamStage<Object[]> q8(StreamStage<Object> events, long windowMs) {
        return persons(events).window(WindowDefinition.tumbling(windowMs))
            .groupingKey(Events.Person::id)
            .aggregate2(AggregateOperations.toList(), auctions(events).groupingKey(Events.Auction::seller),
                AggregateOperations.toList())
            .flatMap(w -> Traversers.traverseIterable(q8Pairs(w.start(), w.result())));
    }

    private static List<Object[]> q8Pairs(long start, Tuple2<List<Events.Person>, List<Events.Auction>> group) {
        List<Object[]> rows = new ArrayList<>();
        for (Events.Person person : group.f0()) {
            for (Events.Auction auction : group.f1()) {
                rows.add(new Object[] {start, person.id(), person.name(), auction.reserve()});
            }
        }
        return rows;
    }

    /** Bids joined with Beam's bounded side input, an array the map function holds. */
    private static StreamStage<Object[]> q13(StreamStage<Events.Bid> bids) {
        String[] side = new String[SIDE_INPUT_SIZE];
        for (int key = 0; key < SIDE_INPUT_SIZE; key++) {
            side[key] = Integer.toString(key);
        }
        return bids.map(b -> new Object[] {b.auction(), b.bidder(), b.price(), b.dateTime(),
            side[(int) (b.bidder() % SIDE_INPUT_SIZE)]});
    }

    /**
     * The canonical rows of the sink's output: windows that end after the last event time (still
     * open, flushed when the input ended) dropped; for Q4 and Q6, each key's last value (the update
     * with the highest count, rows being {key, average, count}).
     */
    static List<Object[]> canonical(String query, List<Object[]> rows, long lastTime) {
        if (query.equals("q5") || query.equals("q7")) {
            return rows.stream().filter(row -> (long) row[0] <= lastTime).toList();
        }
        if (query.equals("q4") || query.equals("q6")) {
            Map<Object, Object[]> last = new HashMap<>();
            for (Object[] row : rows) {
                last.merge(row[0], row, (old, now) -> (long) now[2] > (long) old[2] ? now : old);
            }
            return last.values().stream().map(row -> new Object[] {row[0], row[1]}).toList();
        }
        return rows;
    }
}
