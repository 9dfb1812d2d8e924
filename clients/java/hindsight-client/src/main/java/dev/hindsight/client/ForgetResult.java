package dev.hindsight.client;

import java.util.List;

/** The forget command as recorded: {@code forget} or {@code erase}, the ids, and its log place. */
public record ForgetResult(
        String eventId,
        String command,
        List<String> memoryIds,
        boolean wholeNamespace,
        String topic,
        int partition,
        long offset,
        boolean applied) {}
