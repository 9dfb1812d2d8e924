package dev.hindsight.client;

import java.time.Instant;
import java.util.List;

/**
 * Ranked memories and {@code context}: dated, kind-tagged lines that cite each memory as
 * {@code mem:<first 8 characters of its id>}, ready to put in a prompt.
 */
public record RecallResult(
        String namespace,
        String query,
        Instant at,
        String route,
        List<RecalledMemory> memories,
        String context,
        RecallTrace trace) {}
