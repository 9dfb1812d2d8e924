package dev.hindsight.client;

/** A namespace's policy (the API's {@code PolicyIn}): today, its redaction. */
public record Policy(RedactionSettings redaction) {}
