package dev.hindsight.client;

import java.time.Instant;
import java.util.List;

/**
 * Ranked memories and {@code context}: dated, kind-tagged lines that cite each memory as
 * {@code mem:<first 8 characters of its id>}, ready to put in a prompt. {@code signal}: where the
 * recall's reinforcement signal landed ({@code null} when nothing was reinforced); {@code trace}:
 * how the recall was routed and how many candidates it scored ({@code null} when not reported).
 */
public record RecallResult(
        String namespace,
        String query,
        Instant at,
        String route,
        List<RecalledMemory> memories,
        String context,
        Receipt signal,
        RecallTrace trace) {}
