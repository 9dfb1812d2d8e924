package dev.hindsight.client;

/** Where a turn landed in the log; pass it to {@link RecallRequest#waitFor(TurnReceipt)}. */
public record TurnReceipt(String eventId, String namespace, String topic, int partition, long offset) {}
