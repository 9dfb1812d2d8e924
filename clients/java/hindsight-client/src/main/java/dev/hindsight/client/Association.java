package dev.hindsight.client;

/** A link to another memory: similar, supersedes, superseded_by, merged or same_segment. */
public record Association(String memoryId, String relation, double weight) {}
