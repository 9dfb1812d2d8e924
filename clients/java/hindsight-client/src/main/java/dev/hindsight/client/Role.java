package dev.hindsight.client;

import com.fasterxml.jackson.annotation.JsonValue;

/** Who said a turn. */
public enum Role {
    USER("user"),
    ASSISTANT("assistant"),
    SYSTEM("system"),
    TOOL("tool");

    private final String wire;

    Role(String wire) {
        this.wire = wire;
    }

    @JsonValue
    public String wire() {
        return wire;
    }
}
