package dev.hindsight.client;

import java.time.Instant;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One conversation turn to retain ({@code POST /v1/namespaces/{ns}/turns}). Start with
 * {@link #of} and add what you know; {@code null} leaves a field to the server's default.
 *
 * @param eventTime when it was said (default: the server's now)
 * @param eventId idempotency key: retrying with the same id never creates a second memory
 */
public record Turn(
        String text,
        String speaker,
        String sessionId,
        Instant eventTime,
        Role role,
        Map<String, Object> metadata,
        String eventId) {

    public static Turn of(String text, String speaker, String sessionId) {
        return new Turn(text, speaker, sessionId, null, null, null, null);
    }

    public Turn eventTime(Instant value) {
        return new Turn(text, speaker, sessionId, value, role, metadata, eventId);
    }

    public Turn role(Role value) {
        return new Turn(text, speaker, sessionId, eventTime, value, metadata, eventId);
    }

    public Turn metadata(Map<String, Object> value) {
        return new Turn(text, speaker, sessionId, eventTime, role, Collections.unmodifiableMap(new LinkedHashMap<>(value)), eventId);
    }

    public Turn eventId(String value) {
        return new Turn(text, speaker, sessionId, eventTime, role, metadata, value);
    }
}
