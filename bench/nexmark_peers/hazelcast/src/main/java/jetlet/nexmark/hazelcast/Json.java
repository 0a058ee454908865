package jetlet.nexmark.hazelcast;

import java.util.Map;
import java.util.StringJoiner;

/** Just enough JSON for the report and the rows: null, numbers, strings, arrays, flat objects. */
final class Json {
    private Json() {
    }

    static String array(Object[] values) {
        StringJoiner out = new StringJoiner(",", "[", "]");
        for (Object value : values) {
            out.add(value(value));
        }
        return out.toString();
    }

    static String object(Map<String, Object> fields) {
        StringJoiner out = new StringJoiner(",\n  ", "{\n  ", "\n}");
        fields.forEach((name, value) -> out.add(string(name) + ": " + value(value)));
        return out.toString();
    }

    @SuppressWarnings("unchecked")
    static String value(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof String text) {
            return string(text);
        }
        if (value instanceof Map<?, ?> map) {
            return object((Map<String, Object>) map);
        }
        if (value instanceof Double number && !Double.isFinite(number)) {
            throw new IllegalArgumentException("not a JSON number: " + number);
        }
        return value.toString();
    }

    static String string(String text) {
        StringBuilder out = new StringBuilder(text.length() + 2).append('"');
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }
}
