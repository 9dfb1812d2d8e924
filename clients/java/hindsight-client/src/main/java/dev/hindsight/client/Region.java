package dev.hindsight.client;

import com.fasterxml.jackson.annotation.JsonValue;

/** A memory region: what happened when, abstracted facts, or how-to. */
public enum Region {
    EPISODIC("episodic"),
    SEMANTIC("semantic"),
    PROCEDURAL("procedural");

    private final String wire;

    Region(String wire) {
        this.wire = wire;
    }

    @JsonValue
    public String wire() {
        return wire;
    }
}
