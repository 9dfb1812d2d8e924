package dev.hindsight.client;

import java.time.Instant;
import java.util.List;

/** How a recall was decided: its route (and why), the regions searched, the time window, how many
 * candidates were scored. */
public record RecallTrace(
        String route,
        double routeConfidence,
        String routeReason,
        List<String> regions,
        boolean fallbackUsed,
        Instant windowStart,
        Instant windowEnd,
        String windowLabel,
        int candidates) {}
