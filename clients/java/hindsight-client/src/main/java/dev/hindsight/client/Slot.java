package dev.hindsight.client;

import java.util.List;

/**
 * A statement's slot, what it says with its values masked: a new value in the same slot
 * supersedes the old one.
 *
 * @param frame the statement with its value spans masked
 * @param terms the frame's content words
 * @param values canonical values, such as {@code number:4500} or {@code state:done}
 * @param subjects the values at the start: what the statement is about
 * @param moment told as something that happened at one time ("yesterday")
 * @param additive adds to what was said ("also") rather than replacing it
 * @param question asks rather than states
 * @param vectorB64 the frame's embedding (float32 little-endian, base64), or {@code null}
 */
public record Slot(
        String frame,
        List<String> terms,
        List<String> values,
        List<String> subjects,
        boolean moment,
        boolean additive,
        boolean question,
        String vectorB64) {}
