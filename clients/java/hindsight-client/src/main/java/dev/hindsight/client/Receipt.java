package dev.hindsight.client;

/**
 * Where an event the server published landed in the log, for example a recall's reinforcement
 * {@link RecallResult#signal() signal}; {@link RecallRequest#waitFor(Receipt)} waits for it.
 */
public record Receipt(String eventId, String namespace, String topic, int partition, long offset) {}
