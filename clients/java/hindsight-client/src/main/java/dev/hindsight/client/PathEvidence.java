package dev.hindsight.client;

/** How one recall path ranked and scored a memory. */
public record PathEvidence(int rank, double score) {}
