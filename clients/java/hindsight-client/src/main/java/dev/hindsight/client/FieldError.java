package dev.hindsight.client;

/** One invalid input: its dotted {@code field}, where it was ({@code body}, {@code path}), why. */
public record FieldError(String field, String location, String message, String type) {}
