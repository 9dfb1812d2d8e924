package dev.hindsight.client;

import java.time.Instant;

/**
 * Provenance: a turn a memory came from, and where it sits in the input log ({@code topic},
 * {@code partition}, {@code offset}; {@code null} for memories recorded before the API reported
 * them). {@code keyId} names the data key that sealed the turn ({@code null} for plain input);
 * erasing the memory destroys that key.
 */
public record SourceTurn(
        String eventId,
        String sessionId,
        String speaker,
        Instant eventTime,
        String dialogueId,
        String topic,
        Integer partition,
        Long offset,
        String keyId) {}
