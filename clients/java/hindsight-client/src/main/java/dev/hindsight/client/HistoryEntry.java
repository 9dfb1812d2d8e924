package dev.hindsight.client;

import java.time.Instant;

/** One change to a memory (created, merged, confirmed, superseded, forgotten, ...) and its cause. */
public record HistoryEntry(Instant at, String change, String causeEventId, String detail) {}
