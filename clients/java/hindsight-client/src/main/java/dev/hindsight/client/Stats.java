package dev.hindsight.client;

import java.util.Map;

/** Counts by status, kind and region; {@code watermarks}: applied input offset per partition. */
public record Stats(
        String namespace,
        int memories,
        Map<String, Integer> byStatus,
        Map<String, Integer> byKind,
        Map<String, Integer> byRegion,
        Map<String, Long> watermarks) {}
