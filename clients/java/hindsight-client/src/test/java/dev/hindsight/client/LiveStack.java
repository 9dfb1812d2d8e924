package dev.hindsight.client;

import static org.junit.jupiter.api.Assertions.fail;

import java.util.UUID;
import org.junit.jupiter.api.Assumptions;

/** The running stack under test: HINDSIGHT_URL (and HINDSIGHT_API_KEY). Missing: skip, or fail in CI. */
final class LiveStack {

    private LiveStack() {}

    static HindsightClient client() {
        String url = System.getenv(HindsightClient.URL_VARIABLE);
        if (url == null || url.isBlank()) {
            if ("true".equals(System.getenv("CI"))) {
                fail("HINDSIGHT_URL is not set: CI must run these tests against a live stack");
            }
            Assumptions.abort("HINDSIGHT_URL is not set (start a stack: hindsight up)");
        }
        return HindsightClient.fromEnvironment();
    }

    static String freshNamespace() {
        return "java-" + UUID.randomUUID().toString().substring(0, 12);
    }
}
