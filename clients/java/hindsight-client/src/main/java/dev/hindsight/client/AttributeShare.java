package dev.hindsight.client;

/**
 * One attribute in the slot-attribute model's distribution for a statement.
 *
 * @param attribute the attribute's id
 * @param probability how probable the model finds it
 * @param singleValued whether a person holds one value of that attribute at a time
 */
public record AttributeShare(String attribute, double probability, boolean singleValued) {}
