package jetlet.nexmark.hazelcast;

import java.util.Random;

/**
 * Beam's NEXMark generator with Beam's default configuration, as jetlet.nexmark.generator
 * reproduces it: event {@code n} is a pure function of {@code n} (a {@link Random} seeded with the
 * event id draws its fields in Beam's order), so any processor can generate any slice of the
 * stream. Only the defaults are ported (10,000 events/s, base time 0, events in order).
 */
final class Generator {
    static final long FIRST_PERSON_ID = 1000;
    static final long FIRST_AUCTION_ID = 1000;
    static final long FIRST_CATEGORY_ID = 10;
    private static final int PERSON_PROPORTION = 1;
    private static final int AUCTION_PROPORTION = 3;
    private static final int PROPORTION_DENOMINATOR = 50;
    private static final int NUM_CATEGORIES = 5;
    private static final int ID_LEAD = 10;
    private static final long HOT_RATIO = 100;
    private static final int NUM_ACTIVE_PEOPLE = 1000;
    private static final int NUM_IN_FLIGHT_AUCTIONS = 100;
    private static final int HOT_AUCTION_RATIO = 2;
    private static final int HOT_SELLERS_RATIO = 4;
    private static final int HOT_BIDDERS_RATIO = 4;
    private static final int INTER_EVENT_DELAY_US = 100;
    private static final String[] STATES = {"AZ", "CA", "ID", "OR", "WA", "WY"};
    private static final String[] CITIES = {"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend",
        "Redmond", "Seattle", "Kent", "Cheyenne"};
    private static final String[] FIRST_NAMES = {"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie",
        "Sarah", "Deiter", "Walter"};
    private static final String[] LAST_NAMES = {"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton",
        "Smith", "Jones", "Noris"};

    private Generator() {
    }

    /** The event time (epoch ms) of event {@code n}. */
    static long timestamp(long n) {
        return n * INTER_EVENT_DELAY_US / 1000;
    }

    /** Event number {@code n} (from 0). */
    static Object event(long n) {
        long timestamp = timestamp(n);
        Random random = new Random(n);
        long kind = n % PROPORTION_DENOMINATOR;
        if (kind < PERSON_PROPORTION) {
            return person(n, random, timestamp);
        }
        if (kind < PERSON_PROPORTION + AUCTION_PROPORTION) {
            return auction(n, random, timestamp);
        }
        return bid(n, random, timestamp);
    }

    private static Events.Person person(long id, Random random, long timestamp) {
        String name = FIRST_NAMES[random.nextInt(FIRST_NAMES.length)] + " "
            + LAST_NAMES[random.nextInt(LAST_NAMES.length)];
        String email = nextString(random, 7) + "@" + nextString(random, 5) + ".com";
        String card = String.format("%04d %04d %04d %04d", random.nextInt(10000), random.nextInt(10000),
            random.nextInt(10000), random.nextInt(10000));
        String city = CITIES[random.nextInt(CITIES.length)];
        String state = STATES[random.nextInt(STATES.length)];
        int size = 8 + name.length() + email.length() + card.length() + city.length() + state.length();
        String extra = nextExtra(random, size, 200);
        return new Events.Person(lastPerson(id) + FIRST_PERSON_ID, name, email, card, city, state, timestamp, extra);
    }

    private static Events.Auction auction(long id, Random random, long timestamp) {
        long seller = random.nextInt(HOT_SELLERS_RATIO) > 0
            ? lastPerson(id) / HOT_RATIO * HOT_RATIO : nextPerson(id, random);
        long category = FIRST_CATEGORY_ID + random.nextInt(NUM_CATEGORIES);
        long initialBid = nextPrice(random);
        long eventsForAuctions = (long) NUM_IN_FLIGHT_AUCTIONS * PROPORTION_DENOMINATOR / AUCTION_PROPORTION;
        long horizon = timestamp(id + eventsForAuctions) - timestamp;
        long expires = timestamp + 1 + nextLongBelow(random, Math.max(horizon * 2, 1));
        String itemName = nextString(random, 20);
        String description = nextString(random, 100);
        long reserve = initialBid + nextPrice(random);
        int size = 8 + itemName.length() + description.length() + 40;
        String extra = nextExtra(random, size, 500);
        return new Events.Auction(lastAuction(id) + FIRST_AUCTION_ID, itemName, description, initialBid, reserve,
            timestamp, expires, seller + FIRST_PERSON_ID, category, extra);
    }

    private static Events.Bid bid(long id, Random random, long timestamp) {
        long auction = random.nextInt(HOT_AUCTION_RATIO) > 0
            ? lastAuction(id) / HOT_RATIO * HOT_RATIO : nextAuction(id, random);
        long bidder = random.nextInt(HOT_BIDDERS_RATIO) > 0
            ? lastPerson(id) / HOT_RATIO * HOT_RATIO + 1 : nextPerson(id, random);
        long price = nextPrice(random);
        String extra = nextExtra(random, 32, 100);
        return new Events.Bid(auction + FIRST_AUCTION_ID, bidder + FIRST_PERSON_ID, price, timestamp, extra);
    }

    private static long lastPerson(long id) {
        long epoch = id / PROPORTION_DENOMINATOR;
        long offset = Math.min(id % PROPORTION_DENOMINATOR, PERSON_PROPORTION - 1);
        return epoch * PERSON_PROPORTION + offset;
    }

    private static long lastAuction(long id) {
        long epoch = id / PROPORTION_DENOMINATOR;
        long offset = id % PROPORTION_DENOMINATOR;
        if (offset < PERSON_PROPORTION) {
            epoch--;
            offset = AUCTION_PROPORTION - 1;
        } else if (offset >= PERSON_PROPORTION + AUCTION_PROPORTION) {
            offset = AUCTION_PROPORTION - 1;
        } else {
            offset -= PERSON_PROPORTION;
        }
        return epoch * AUCTION_PROPORTION + offset;
    }

    private static long nextPerson(long id, Random random) {
        long people = lastPerson(id) + 1;
        long active = Math.min(people, NUM_ACTIVE_PEOPLE);
        return people - active + nextLongBelow(random, active + ID_LEAD);
    }

    private static long nextAuction(long id, Random random) {
        long latest = lastAuction(id);
        long lowest = Math.max(latest - NUM_IN_FLIGHT_AUCTIONS, 0);
        return lowest + nextLongBelow(random, latest - lowest + 1 + ID_LEAD);
    }

    private static long nextLongBelow(Random random, long bound) {
        return bound < Integer.MAX_VALUE ? random.nextInt((int) bound) : Math.abs(random.nextLong()) % bound;
    }

    private static long round(double value) {
        return (long) Math.floor(value + 0.5);
    }

    private static long nextPrice(Random random) {
        return round(Math.pow(10.0, random.nextDouble() * 6.0) * 100.0);
    }

    private static String nextString(Random random, int maxLength) {
        int length = 3 + random.nextInt(maxLength - 3);
        StringBuilder chars = new StringBuilder(length);
        for (int i = 0; i < length; i++) {
            chars.append(random.nextInt(13) == 0 ? ' ' : (char) ('a' + random.nextInt(26)));
        }
        return chars.toString().trim();
    }

    private static String nextExactString(Random random, long length) {
        StringBuilder chars = new StringBuilder((int) length);
        int draw = 0;
        int left = 0;
        for (long i = 0; i < length; i++) {
            if (left == 0) {
                draw = random.nextInt();
                left = 6;
            }
            chars.append((char) ('a' + draw % 26));
            draw /= 26;
            left--;
        }
        return chars.toString();
    }

    private static String nextExtra(Random random, int currentSize, int desiredAverageSize) {
        if (currentSize > desiredAverageSize) {
            return "";
        }
        long wanted = desiredAverageSize - currentSize;
        long delta = round(wanted * 0.2);
        long size = wanted - delta + (delta == 0 ? 0 : random.nextInt((int) (2 * delta)));
        return nextExactString(random, size);
    }
}
