package dev.hindsight.client;

/**
 * {@code GET /healthz}: the broker and topic prefix the API serves, how many brokers answered and
 * how many partitions report; {@code status} is "unavailable" (with {@code error}) when the broker
 * did not answer.
 */
public record Health(
        String status, String bootstrap, String topicPrefix, int brokers, int watermarks, String error) {}
