package dev.hindsight.client;

import java.util.List;

/**
 * The forget command as recorded: {@code forget} or {@code erase}, its place in the log, and,
 * once the views {@code applied} it, the {@code memoryIds} it took. Without waiting (or when the
 * wait ran out) {@code applied} is {@code false} and {@code memoryIds} is empty: the command is in
 * the log and still applies.
 */
public record ForgetResult(
        String eventId,
        String command,
        List<String> memoryIds,
        boolean wholeNamespace,
        String topic,
        int partition,
        long offset,
        boolean applied) {}
