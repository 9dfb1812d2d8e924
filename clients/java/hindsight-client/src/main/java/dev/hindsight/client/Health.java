package dev.hindsight.client;

/** {@code GET /healthz}: the broker and topic prefix the API serves, how many partitions report. */
public record Health(String status, String bootstrap, String topicPrefix, int watermarks) {}
