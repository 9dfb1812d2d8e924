package dev.hindsight.client;

import java.time.Instant;
import java.util.List;

/**
 * One memory as {@code GET /v1/namespaces/{ns}/memories/{id}} shows it: content, importance,
 * status, {@code provenance} (the turns it came from) and {@code history} (every change since).
 * {@code slot} is the statement's masked slot ({@code null} when it has none); {@code originOffset}
 * is the input offset of the turn that created it ({@code -1} when unknown).
 */
public record Memory(
        int schemaVersion,
        String id,
        String namespace,
        String region,
        String kind,
        String content,
        String searchText,
        List<String> entities,
        Triplet triplet,
        Slot slot,
        double baseImportance,
        int confirmations,
        double importance,
        Instant createdAt,
        Instant validFrom,
        Instant validTo,
        Instant updatedAt,
        String status,
        boolean pinned,
        String supersededBy,
        List<Association> associations,
        List<SourceTurn> provenance,
        String segmentId,
        int accessCount,
        Instant lastAccess,
        double activation,
        Instant activationAt,
        List<HistoryEntry> history,
        long originOffset) {}
