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
 * @param departed values a switch says were left ("moved from MySQL to ...")
 * @param moment told as something that happened at one time ("yesterday")
 * @param additive adds to what was said ("also") rather than replacing it
 * @param question asks rather than states
 * @param keeps says its value holds on ("still"): gives no new one
 * @param weighs only weighs a change ("might"): has not made it
 * @param ends says something stopped ("gave up")
 * @param corrects says what was told before was wrong ("my bad")
 * @param amountMoved a number right after words that say it moved ("up to")
 * @param vectorB64 the frame's embedding (float32 little-endian, base64), or {@code null}
 * @param attribute the attribute the slot-attribute model reads the statement as giving a value
 *     of ({@code none}: none), or {@code null} when the model did not read it
 * @param attributeProbability how sure the model is of that attribute
 * @param singleValued whether a person holds one value of that attribute at a time, so a new
 *     value replaces the old one
 * @param attributeShares the model's most probable attributes, most probable first, or {@code
 *     null} in records of builds that kept only the most probable one
 * @param stage the stage of a task the task-stage model reads the statement as telling ({@code
 *     planned}, {@code in_progress}, {@code done}, or {@code none}), or {@code null} when the
 *     model did not read it
 * @param stageProbability how sure the model is of that stage
 */
public record Slot(
        String frame,
        List<String> terms,
        List<String> values,
        List<String> subjects,
        List<String> departed,
        boolean moment,
        boolean additive,
        boolean question,
        boolean keeps,
        boolean weighs,
        boolean ends,
        boolean corrects,
        boolean amountMoved,
        String vectorB64,
        String attribute,
        double attributeProbability,
        boolean singleValued,
        List<AttributeShare> attributeShares,
        String stage,
        double stageProbability) {}
