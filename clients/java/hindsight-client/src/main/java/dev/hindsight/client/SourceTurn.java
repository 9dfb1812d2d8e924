package dev.hindsight.client;

import java.time.Instant;

/** Provenance: a turn a memory came from. */
public record SourceTurn(
        String eventId, String sessionId, String speaker, Instant eventTime, String dialogueId) {}
