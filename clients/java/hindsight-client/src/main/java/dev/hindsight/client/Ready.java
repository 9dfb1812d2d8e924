package dev.hindsight.client;

import java.util.List;
import java.util.Map;

/**
 * {@code GET /readyz}: whether the recall view follows the state topic and is caught up to within
 * {@code maxLag} input messages. {@code reasons} (why not) and {@code viewLag} (messages behind,
 * per {@code topic:partition}) are filled in for an admin key only.
 */
public record Ready(boolean ready, List<String> reasons, Map<String, Long> viewLag, long maxLag) {}
