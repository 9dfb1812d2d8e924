package dev.hindsight.client;

import java.time.Instant;
import java.util.List;
import java.util.Map;

/**
 * One recalled memory with its score and {@code explanation}: which recall paths (dense, bm25,
 * entity, temporal, activation) found it, at what rank and score, and {@code fused}, the paths'
 * weighted reciprocal-rank fusion that ranked it before scoring. {@code region}, {@code kind}
 * and {@code status} are the API's strings, so a value added later reads without an upgrade.
 */
public record RecalledMemory(
        String id,
        String namespace,
        String content,
        String region,
        String kind,
        double importance,
        String status,
        Instant createdAt,
        Instant validFrom,
        Instant validTo,
        double score,
        double relevance,
        double freshness,
        double fused,
        Map<String, PathEvidence> explanation,
        List<SourceTurn> provenance,
        String supersededBy,
        List<String> supersedeChain,
        List<HistoryEntry> history,
        boolean viaFallback) {}
