package dev.hindsight.client;

import java.util.List;

/**
 * A namespace's opt-in redaction: from the policy's place in the log on, the chosen kinds of
 * personal data and secrets become typed placeholders ({@code [EMAIL_1]}) before anything
 * extracts, embeds or stores a turn.
 *
 * @param enabled whether turns are redacted
 * @param kinds what to redact: {@code SECRET, EMAIL, CN_ID, CARD, IBAN, PHONE} (all when null)
 * @param phoneRegion ISO 3166 code for national phone formats (international only when null)
 */
public record RedactionSettings(Boolean enabled, List<String> kinds, String phoneRegion) {

    /** Redact every kind. */
    public static RedactionSettings all() {
        return new RedactionSettings(true, null, null);
    }

    /** No redaction from here on. */
    public static RedactionSettings off() {
        return new RedactionSettings(false, null, null);
    }
}
