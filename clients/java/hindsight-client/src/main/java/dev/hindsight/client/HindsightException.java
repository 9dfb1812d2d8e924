package dev.hindsight.client;

import java.util.List;

/**
 * A non-2xx answer from the Hindsight API: the HTTP status, the bad input's {@code field} when
 * the server named one (for example {@code text}, {@code limit}, {@code memory_id}), and the
 * message. Transport failures are {@link java.io.UncheckedIOException}s instead.
 */
public class HindsightException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final int status;
    private final String field;
    private final transient List<FieldError> errors;

    public HindsightException(int status, String message, String field, List<FieldError> errors) {
        super(message);
        this.status = status;
        this.field = field;
        this.errors = errors == null ? List.of() : List.copyOf(errors);
    }

    /** The HTTP status: 422 invalid input, 404 unknown memory, 401/403 auth, 504 wait timed out. */
    public int status() {
        return status;
    }

    /** The dotted path of the bad input, or {@code null} when the error is not about one field. */
    public String field() {
        return field;
    }

    /** Every field error the server reported (a 422 can name several). */
    public List<FieldError> errors() {
        return errors;
    }
}
