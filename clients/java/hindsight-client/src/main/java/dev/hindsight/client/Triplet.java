package dev.hindsight.client;

/** A (subject, attribute, value) fact; a new value for the same pair supersedes the old one. */
public record Triplet(String subject, String attribute, String value) {}
