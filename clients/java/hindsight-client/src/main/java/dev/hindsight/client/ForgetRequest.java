package dev.hindsight.client;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.time.Duration;
import java.util.List;

/**
 * A forget ({@code POST /v1/namespaces/{ns}/forget}) of {@link #byIds memory ids}, of what a
 * {@link #byQuery query} finds (resolved by the server and recorded with the ids), or of the
 * {@link #everything whole namespace}. Soft by default (kept for audit, never recalled);
 * {@link #hard(boolean) hard} erases. Waits for the views to apply it unless told not to.
 */
public record ForgetRequest(
        List<String> ids,
        String query,
        Boolean all,
        Boolean hard,
        String reason,
        @JsonProperty("wait") Boolean waitApplied,
        Double waitTimeout) {

    public static ForgetRequest byIds(String... ids) {
        return new ForgetRequest(List.of(ids), null, null, null, null, null, null);
    }

    public static ForgetRequest byIds(List<String> ids) {
        return new ForgetRequest(List.copyOf(ids), null, null, null, null, null, null);
    }

    public static ForgetRequest byQuery(String query) {
        return new ForgetRequest(null, query, null, null, null, null, null);
    }

    public static ForgetRequest everything() {
        return new ForgetRequest(null, null, true, null, null, null, null);
    }

    public ForgetRequest hard(boolean value) {
        return new ForgetRequest(ids, query, all, value, reason, waitApplied, waitTimeout);
    }

    public ForgetRequest reason(String value) {
        return new ForgetRequest(ids, query, all, hard, value, waitApplied, waitTimeout);
    }

    /** {@code false}: return once the command is in the log, before the views applied it. */
    public ForgetRequest waitApplied(boolean value) {
        return new ForgetRequest(ids, query, all, hard, reason, value, waitTimeout);
    }

    public ForgetRequest waitTimeout(Duration value) {
        double seconds = value.toMillis() / 1000.0;
        return new ForgetRequest(ids, query, all, hard, reason, waitApplied, seconds);
    }
}
