package dev.hindsight.client;

import com.fasterxml.jackson.annotation.JsonInclude;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Objects;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.DeserializationFeature;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.PropertyNamingStrategies;
import tools.jackson.databind.json.JsonMapper;

/**
 * A thin, thread-safe client for the Hindsight HTTP API ({@code /v1/namespaces/{ns}/...}).
 *
 * <pre>{@code
 * HindsightClient memory = HindsightClient.builder("http://127.0.0.1:8765").apiKey(key).build();
 * TurnReceipt receipt = memory.retain("alice", Turn.of("I prefer dark mode.", "alice", "s1"));
 * RecallResult result = memory.recall("alice", RecallRequest.of("which theme?").waitFor(receipt));
 * }</pre>
 *
 * <p>Every non-2xx answer is a {@link HindsightException} carrying the status and the field the
 * server named; transport failures are {@link UncheckedIOException}s.
 */
public final class HindsightClient {

    /** Environment variables read by {@link #fromEnvironment()}. */
    public static final String URL_VARIABLE = "HINDSIGHT_URL";

    public static final String API_KEY_VARIABLE = "HINDSIGHT_API_KEY";

    private static final Duration SERVER_WAIT_DEFAULT = Duration.ofSeconds(30);

    // /readyz answers 503 with its usual body while the view catches up.
    private static final int NOT_READY = 503;

    // Unknown response fields are ignored, so a newer server does not break an older client; a
    // null where a record has a primitive still fails (the records follow the API's schema).
    static final JsonMapper JSON = JsonMapper.builder()
            .propertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
            .changeDefaultPropertyInclusion(
                    inclusion -> JsonInclude.Value.construct(
                            JsonInclude.Include.NON_NULL, JsonInclude.Include.NON_NULL))
            .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
            .build();

    private final URI baseUrl;
    private final String apiKey;
    private final Duration timeout;
    private final HttpClient http;

    private HindsightClient(Builder builder) {
        String base = builder.baseUrl.replaceAll("/+$", "");
        this.baseUrl = URI.create(base);
        this.apiKey = builder.apiKey == null || builder.apiKey.isBlank() ? null : builder.apiKey;
        this.timeout = builder.timeout;
        // HTTP/1.1: on plain http the default (HTTP/2) adds an h2c upgrade to every request,
        // which the API's server (uvicorn) declines with a warning each time.
        this.http = builder.http != null
                ? builder.http
                : HttpClient.newBuilder()
                        .version(HttpClient.Version.HTTP_1_1)
                        .connectTimeout(Duration.ofSeconds(10))
                        .build();
    }

    public static Builder builder(String baseUrl) {
        return new Builder(baseUrl);
    }

    /** A client for {@code HINDSIGHT_URL}, with {@code HINDSIGHT_API_KEY} when it is set. */
    public static HindsightClient fromEnvironment() {
        String url = System.getenv(URL_VARIABLE);
        if (url == null || url.isBlank()) {
            throw new IllegalStateException(URL_VARIABLE + " is not set (the API's base URL)");
        }
        return builder(url).apiKey(System.getenv(API_KEY_VARIABLE)).build();
    }

    public URI baseUrl() {
        return baseUrl;
    }

    /** Retain one turn; the receipt says where it landed in the log. */
    public TurnReceipt retain(String namespace, Turn turn) {
        return send("POST", namespacePath(namespace, "turns"), turn, Duration.ZERO, TurnReceipt.class);
    }

    public TurnReceipt retain(String namespace, String text, String speaker, String sessionId) {
        return retain(namespace, Turn.of(text, speaker, sessionId));
    }

    /** Ranked memories and a context block citing them; waits first when asked to. */
    public RecallResult recall(String namespace, RecallRequest request) {
        Duration serverWait = request.waitForOffset() == null ? Duration.ZERO : waitOf(request.waitTimeout());
        return send("POST", namespacePath(namespace, "recall"), request, serverWait, RecallResult.class);
    }

    public RecallResult recall(String namespace, String query) {
        return recall(namespace, RecallRequest.of(query));
    }

    /** Forget (soft) or erase (hard) by ids, by query, or the whole namespace. */
    public ForgetResult forget(String namespace, ForgetRequest request) {
        Duration serverWait =
                Boolean.FALSE.equals(request.waitApplied()) ? Duration.ZERO : waitOf(request.waitTimeout());
        return send("POST", namespacePath(namespace, "forget"), request, serverWait, ForgetResult.class);
    }

    /** One memory with provenance and history; a 404 {@link HindsightException} if unknown. */
    public Memory inspect(String namespace, String memoryId) {
        return send("GET", namespacePath(namespace, "memories", memoryId), null, Duration.ZERO, Memory.class);
    }

    /**
     * The memory with the values redaction replaced put back, read from the original turns in
     * the log; needs a key with {@code admin} on the namespace (403 otherwise).
     */
    public Memory inspectRevealed(String namespace, String memoryId) {
        String path = namespacePath(namespace, "memories", memoryId) + "?reveal=true";
        return send("GET", path, null, Duration.ZERO, Memory.class);
    }

    /** Set the namespace's redaction from this point of its log on ({@code admin}). */
    public TurnReceipt setPolicy(String namespace, RedactionSettings redaction) {
        return send("PUT", namespacePath(namespace, "policy"), new Policy(redaction), Duration.ZERO, TurnReceipt.class);
    }

    /** The namespace's policy as the pipeline last recorded it ({@code admin}). */
    public Policy policy(String namespace) {
        return send("GET", namespacePath(namespace, "policy"), null, Duration.ZERO, Policy.class);
    }

    public Stats stats(String namespace) {
        return send("GET", namespacePath(namespace, "stats"), null, Duration.ZERO, Stats.class);
    }

    public Health health() {
        return send("GET", "/healthz", null, Duration.ZERO, Health.class);
    }

    /** Whether the recall view is caught up; a 503 (not ready) is answered, not thrown. */
    public Ready ready() {
        return send("GET", "/readyz", null, Duration.ZERO, Ready.class, NOT_READY);
    }

    private static Duration waitOf(Double seconds) {
        return seconds == null ? SERVER_WAIT_DEFAULT : Duration.ofMillis((long) (seconds * 1000));
    }

    private static String namespacePath(String namespace, String... rest) {
        StringBuilder path = new StringBuilder("/v1/namespaces/").append(segment(namespace));
        for (String part : rest) {
            path.append('/').append(segment(part));
        }
        return path.toString();
    }

    private static String segment(String value) {
        Objects.requireNonNull(value, "path segment");
        // URLEncoder is for forms: a space becomes '+', which a path must spell %20.
        return URLEncoder.encode(value, StandardCharsets.UTF_8).replace("+", "%20");
    }

    private <T> T send(String method, String path, Object body, Duration serverWait, Class<T> type) {
        return send(method, path, body, serverWait, type, -1);
    }

    /** {@code bodyStatus}: a non-2xx status whose answer is still a {@code type} body. */
    private <T> T send(
            String method, String path, Object body, Duration serverWait, Class<T> type, int bodyStatus) {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(baseUrl + path))
                .timeout(timeout.plus(serverWait))
                .header("accept", "application/json");
        if (apiKey != null) {
            request.header("authorization", "Bearer " + apiKey);
        }
        if (body == null) {
            request.method(method, HttpRequest.BodyPublishers.noBody());
        } else {
            request.header("content-type", "application/json");
            request.method(method, HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body)));
        }
        HttpResponse<String> response;
        try {
            response = http.send(request.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            throw new UncheckedIOException(new InterruptedIOException(method + " " + path + " interrupted"));
        } catch (IOException failure) {
            throw new UncheckedIOException(method + " " + baseUrl + path + ": " + failure.getMessage(), failure);
        }
        if (response.statusCode() / 100 != 2 && response.statusCode() != bodyStatus) {
            throw errorFrom(response);
        }
        return JSON.readValue(response.body(), type);
    }

    private static HindsightException errorFrom(HttpResponse<String> response) {
        int status = response.statusCode();
        String text = response.body();
        try {
            JsonNode body = JSON.readTree(text);
            if (body.has("error")) {
                ErrorBody error = JSON.treeToValue(body, ErrorBody.class);
                return new HindsightException(status, error.error(), error.field(), error.errors());
            }
            if (body.path("detail").isString()) {
                // FastAPI's own shape, e.g. an HTTPException from an auth dependency.
                return new HindsightException(status, body.get("detail").asString(), null, null);
            }
        } catch (JacksonException notJson) {
            // A proxy's page or a crash: keep what was said, below.
        }
        String message = "HTTP " + status + (text == null || text.isBlank() ? "" : ": " + text);
        return new HindsightException(status, message, null, null);
    }

    /** Configures a {@link HindsightClient}. */
    public static final class Builder {
        private final String baseUrl;
        private String apiKey;
        private Duration timeout = Duration.ofSeconds(60);
        private HttpClient http;

        private Builder(String baseUrl) {
            if (baseUrl == null || baseUrl.isBlank()) {
                throw new IllegalArgumentException("baseUrl: the API's base URL is required");
            }
            this.baseUrl = baseUrl;
        }

        /** Sent as {@code Authorization: Bearer <apiKey>}; {@code null} or blank sends none. */
        public Builder apiKey(String value) {
            this.apiKey = value;
            return this;
        }

        /** Per request; recall and forget add the time they ask the server to wait. */
        public Builder timeout(Duration value) {
            this.timeout = Objects.requireNonNull(value, "timeout");
            return this;
        }

        /** Your own {@link HttpClient} (proxy, executor, TLS); default: a new one. */
        public Builder httpClient(HttpClient value) {
            this.http = Objects.requireNonNull(value, "httpClient");
            return this;
        }

        public HindsightClient build() {
            return new HindsightClient(this);
        }
    }
}
