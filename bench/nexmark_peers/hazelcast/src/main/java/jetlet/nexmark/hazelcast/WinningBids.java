package jetlet.nexmark.hazelcast;

import com.hazelcast.function.ComparatorEx;
import com.hazelcast.jet.Traverser;
import com.hazelcast.jet.Traversers;
import com.hazelcast.jet.core.AbstractProcessor;
import com.hazelcast.jet.core.Watermark;
import com.hazelcast.jet.impl.JetEvent;
import com.hazelcast.jet.pipeline.StreamStage;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.TreeMap;

/**
 * Q4 and Q6: an auction closes at its own expiry, in event time, with its winning bid (the highest
 * price at or above the reserve within its lifetime, then the earliest). The Pipeline API has no
 * per-key event-time timer, so the closing is a Core API processor ({@link WinningBidsP}) in a
 * partitioned custom transform: it holds the open auctions and closes them as the watermark passes
 * their expiry, and at the end of the input those that expired by the last event time. Pipeline
 * stages then average the winners per category (Q4) or over each seller's last 10 (Q6).
 */
final class WinningBids {
    private static final int LAST_AUCTIONS = 10;

    private WinningBids() {
    }

    /** An auction's winning price. */
    record Winner(Events.Auction auction, long price) {
    }

    static StreamStage<Winner> winners(StreamStage<Object> events, long lastTime) {
        return events.filter(e -> e instanceof Events.Auction || e instanceof Events.Bid)
            .groupingKey(e -> e instanceof Events.Auction a ? a.id() : ((Events.Bid) e).auction())
            .customTransform("winning-bids", () -> new WinningBidsP(lastTime));
    }

    /** Average winning price per category: rows {category, average, winners so far}. */
    static StreamStage<Object[]> q4(StreamStage<Object> events, long lastTime) {
        return winners(events, lastTime)
            .groupingKey(w -> w.auction().category())
            .mapStateful(() -> new long[2], (sum, category, winner) -> {
                sum[0] += winner.price();
                sum[1]++;
                return new Object[] {category, average(sum[0], sum[1]), sum[1]};
            });
    }

    /**
     * Average winning price over each seller's last 10 closed auctions, in closing order
     * (expiry, then id): the state keeps the 10 latest by that order whatever order the winners
     * arrive in from the parallel closing processors. Rows {seller, average, winners so far}.
     */
    static StreamStage<Object[]> q6(StreamStage<Object> events, long lastTime) {
        ComparatorEx<Events.Auction> closing = ComparatorEx.comparingLong(Events.Auction::expires)
            .thenComparingLong(Events.Auction::id);
        return winners(events, lastTime)
            .groupingKey(w -> w.auction().seller())
            .mapStateful(() -> new SellerState(closing), (state, seller, winner) -> {
                state.latest.put(winner.auction(), winner.price());
                if (state.latest.size() > LAST_AUCTIONS) {
                    state.latest.pollFirstEntry();
                }
                state.winners++;
                long sum = state.latest.values().stream().mapToLong(Long::longValue).sum();
                return new Object[] {seller, average(sum, state.latest.size()), state.winners};
            });
    }

    /** Q6's state per seller: its latest winners by closing order, and how many it has had. */
    static final class SellerState {
        final TreeMap<Events.Auction, Long> latest;
        long winners;

        SellerState(Comparator<Events.Auction> closing) {
            latest = new TreeMap<>(closing);
        }
    }

    /** {@code sum / count} rounded to 6 decimals as Python's round() does (half-even on the exact value). */
    static double average(long sum, long count) {
        return new BigDecimal((double) sum / count).setScale(6, RoundingMode.HALF_EVEN).doubleValue();
    }

    /** Holds the open auctions of its partition and emits each one's winner when it closes. */
    static final class WinningBidsP extends AbstractProcessor {
        private final long lastTime;
        private final Map<Long, Open> open = new HashMap<>();
        private final PriorityQueue<Open> closing = new PriorityQueue<>(
            Comparator.comparingLong((Open o) -> o.auction.expires()).thenComparingLong(o -> o.auction.id()));
        private final Map<Long, List<Events.Bid>> early = new HashMap<>();
        private Traverser<Object> emitting;

        WinningBidsP(long lastTime) {
            this.lastTime = lastTime;
        }

        @Override
        protected boolean tryProcess(int ordinal, Object item) {
            Object event = item instanceof JetEvent<?> jetEvent ? jetEvent.payload() : item;
            if (event instanceof Events.Auction auction) {
                Open opened = new Open(auction);
                open.put(auction.id(), opened);
                closing.add(opened);
                List<Events.Bid> before = early.remove(auction.id());
                if (before != null) {
                    before.forEach(opened::offer);
                }
            } else {
                Events.Bid bid = (Events.Bid) event;
                Open auction = open.get(bid.auction());
                if (auction != null) {
                    auction.offer(bid);
                } else {
                    early.computeIfAbsent(bid.auction(), id -> new ArrayList<>()).add(bid);
                }
            }
            return true;
        }

        /** Closes the auctions expired by the watermark; a bid older than it can no longer count. */
        @Override
        public boolean tryProcessWatermark(Watermark watermark) {
            if (emitting == null) {
                long time = watermark.timestamp();
                early.values().removeIf(bids -> bids.removeIf(bid -> bid.dateTime() < time) && bids.isEmpty());
                emitting = close(time).append(watermark);
            }
            return emitted();
        }

        @Override
        public boolean complete() {
            if (emitting == null) {
                emitting = close(lastTime);
            }
            return emitted();
        }

        private boolean emitted() {
            if (emitFromTraverser(emitting)) {
                emitting = null;
                return true;
            }
            return false;
        }

        private Traverser<Object> close(long time) {
            List<Object> winners = new ArrayList<>();
            while (!closing.isEmpty() && closing.peek().auction.expires() <= time) {
                Open closed = closing.poll();
                open.remove(closed.auction.id());
                if (closed.best != null) {
                    winners.add(JetEvent.jetEvent(closed.auction.expires(), new Winner(closed.auction, closed.best.price())));
                }
            }
            return Traversers.traverseIterable(winners);
        }
    }

    /** An open auction and its best valid bid so far. */
    static final class Open {
        final Events.Auction auction;
        Events.Bid best;

        Open(Events.Auction auction) {
            this.auction = auction;
        }

        void offer(Events.Bid bid) {
            boolean valid = auction.dateTime() <= bid.dateTime() && bid.dateTime() < auction.expires()
                && bid.price() >= auction.reserve();
            if (valid && (best == null || bid.price() > best.price()
                || bid.price() == best.price() && bid.dateTime() < best.dateTime())) {
                best = bid;
            }
        }
    }
}
