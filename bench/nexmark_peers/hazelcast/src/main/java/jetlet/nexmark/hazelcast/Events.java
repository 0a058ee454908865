package jetlet.nexmark.hazelcast;

/**
 * NEXMark's three event kinds, with Beam's fields (jetlet.nexmark.model). Records, so Hazelcast
 * serializes them with zero-config Compact serialization when they cross members.
 */
final class Events {
    private Events() {
    }

    /** A new person (a seller or bidder). */
    record Person(long id, String name, String emailAddress, String creditCard, String city, String state,
                  long dateTime, String extra) {
    }

    /** A new auction, open from {@code dateTime} until {@code expires}. */
    record Auction(long id, String itemName, String description, long initialBid, long reserve, long dateTime,
                   long expires, long seller, long category, String extra) {
    }

    /** A bid on an auction (Beam's generator leaves channel and url unset). */
    record Bid(long auction, long bidder, long price, long dateTime, String extra) {
    }
}
