package dev.hindsight.client;

import java.time.Duration;
import java.time.Instant;
import java.util.List;

/**
 * A recall ({@code POST /v1/namespaces/{ns}/recall}): {@code RecallRequest.of("which db?")
 * .waitFor(receipt).includeHistory(true)}. {@code null} fields are left to the server.
 *
 * @param waitForOffset read-your-writes: the turn offset the views must have applied first
 * @param waitTimeout seconds the server may wait for it (default 30, at most 300), then a 504
 * @param at recall as of this time (default now)
 * @param reinforce publish the hits as a reinforcement signal (default true)
 */
public record RecallRequest(
        String query,
        Instant at,
        Integer limit,
        List<Region> regions,
        Long waitForOffset,
        Double waitTimeout,
        Boolean includeHistory,
        Integer budgetChars,
        Boolean reinforce) {

    public static RecallRequest of(String query) {
        return new RecallRequest(query, null, null, null, null, null, null, null, null);
    }

    public RecallRequest waitFor(TurnReceipt receipt) {
        return waitFor(receipt.offset());
    }

    /** Waits for another event the server published, such as a recall's signal. */
    public RecallRequest waitFor(Receipt receipt) {
        return waitFor(receipt.offset());
    }

    public RecallRequest waitFor(long offset) {
        return new RecallRequest(
                query, at, limit, regions, offset, waitTimeout, includeHistory, budgetChars, reinforce);
    }

    public RecallRequest waitTimeout(Duration value) {
        double seconds = value.toMillis() / 1000.0;
        return new RecallRequest(
                query, at, limit, regions, waitForOffset, seconds, includeHistory, budgetChars, reinforce);
    }

    public RecallRequest at(Instant value) {
        return new RecallRequest(
                query, value, limit, regions, waitForOffset, waitTimeout, includeHistory, budgetChars,
                reinforce);
    }

    public RecallRequest limit(int value) {
        return new RecallRequest(
                query, at, value, regions, waitForOffset, waitTimeout, includeHistory, budgetChars,
                reinforce);
    }

    public RecallRequest regions(Region... value) {
        return new RecallRequest(
                query, at, limit, List.of(value), waitForOffset, waitTimeout, includeHistory,
                budgetChars, reinforce);
    }

    public RecallRequest includeHistory(boolean value) {
        return new RecallRequest(
                query, at, limit, regions, waitForOffset, waitTimeout, value, budgetChars, reinforce);
    }

    public RecallRequest budgetChars(int value) {
        return new RecallRequest(
                query, at, limit, regions, waitForOffset, waitTimeout, includeHistory, value, reinforce);
    }

    public RecallRequest reinforce(boolean value) {
        return new RecallRequest(
                query, at, limit, regions, waitForOffset, waitTimeout, includeHistory, budgetChars, value);
    }
}
