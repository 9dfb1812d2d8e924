package dev.hindsight.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.PropertyNamingStrategies;
import tools.jackson.databind.json.JsonMapper;

/** The client against a live Hindsight API (no mocks). */
class HindsightClientTest {

    private HindsightClient memory;
    private String namespace;

    @BeforeEach
    void connect() {
        memory = LiveStack.client();
        namespace = LiveStack.freshNamespace();
    }

    private static String citation(String memoryId) {
        // How the context block cites a memory: "mem:" + the id's first 8 characters.
        return "mem:" + memoryId.substring(0, 8);
    }

    @Test
    void healthAnswersOk() {
        Health health = memory.health();
        assertEquals("ok", health.status());
        assertTrue(health.watermarks() >= 1);
    }

    @Test
    void retainThenRecallWithWaitForFindsTheTurn() {
        TurnReceipt receipt =
                memory.retain(namespace, "Our staging database runs on PostgreSQL 16.", "alice", "s1");
        assertEquals(namespace, receipt.namespace());
        assertTrue(receipt.offset() >= 0);

        RecallResult result = memory.recall(
                namespace, RecallRequest.of("Which database does staging use?").waitFor(receipt).limit(5));
        RecalledMemory hit = result.memories().stream()
                .filter(m -> m.content().contains("PostgreSQL 16"))
                .findFirst()
                .orElseThrow(() -> new AssertionError("not recalled: " + result));
        assertEquals(namespace, hit.namespace());
        assertTrue(result.context().contains(citation(hit.id())), result.context());
        assertTrue(hit.explanation().containsKey("dense"), hit.explanation().toString());

        RecallResult before = memory.recall(namespace,
                RecallRequest.of("Which database does staging use?").at(Instant.parse("2001-01-01T00:00:00Z")));
        assertEquals(List.of(), before.memories(), "nothing was said in 2001");
    }

    @Test
    void aRecallReportsItsSignalAndTrace() {
        TurnReceipt receipt = memory.retain(namespace, "The release train leaves every second Tuesday.", "fay", "s1");
        RecallResult reinforced = memory.recall(namespace, RecallRequest.of("When does the release train leave?")
                .waitFor(receipt));
        assertTrue(!reinforced.memories().isEmpty(), reinforced.toString());
        Receipt signal = reinforced.signal();
        assertTrue(signal != null, "a recall with hits publishes a reinforcement signal: " + reinforced);
        assertEquals(namespace, signal.namespace());
        assertEquals(receipt.topic(), signal.topic());
        assertTrue(signal.offset() > receipt.offset(), signal + " after " + receipt);
        assertEquals(reinforced.route(), reinforced.trace().route());
        assertTrue(reinforced.trace().candidates() >= 1, reinforced.trace().toString());

        // The signal is an event like any other: a recall can wait for it.
        RecallResult quiet = memory.recall(namespace, RecallRequest.of("When does the release train leave?")
                .waitFor(signal).reinforce(false));
        assertEquals(null, quiet.signal(), "reinforce=false publishes nothing");
        RecalledMemory hit = quiet.memories().stream()
                .filter(m -> m.content().contains("release train"))
                .findFirst()
                .orElseThrow(() -> new AssertionError("not recalled: " + quiet));
        assertTrue(hit.fused() > 0, "the paths' fused score ranked it: " + hit);
    }

    @Test
    void readyReportsTheViewCaughtUp() {
        Ready ready = memory.ready();
        assertTrue(ready.ready(), ready.toString());
        assertTrue(ready.maxLag() >= 0, ready.toString());
    }

    @Test
    void unknownResponseFieldsAreIgnored() {
        // A newer server may add fields; the records read what they know.
        TurnReceipt receipt = HindsightClient.JSON.readValue(
                "{\"event_id\":\"e1\",\"namespace\":\"n\",\"topic\":\"t\",\"partition\":1,"
                        + "\"offset\":7,\"added_later\":{\"x\":[1]}}",
                TurnReceipt.class);
        assertEquals(new TurnReceipt("e1", "n", "t", 1, 7), receipt);
    }

    @Test
    void forgetByQueryStopsRecallAndKeepsTheRest() {
        memory.retain(namespace, "My gym locker code is 4417.", "bob", "s1");
        TurnReceipt kept = memory.retain(namespace, "I drink my coffee black, no sugar.", "bob", "s1");
        RecallResult before = memory.recall(namespace, RecallRequest.of("gym locker code").waitFor(kept));
        assertTrue(before.memories().stream().anyMatch(m -> m.content().contains("4417")), before.toString());

        ForgetResult forgotten = memory.forget(namespace, ForgetRequest.byQuery("gym locker code"));
        assertEquals("forget", forgotten.command());
        assertTrue(forgotten.applied());
        assertTrue(!forgotten.memoryIds().isEmpty());

        RecallResult after = memory.recall(namespace, RecallRequest.of("gym locker code").includeHistory(true));
        assertTrue(after.memories().stream().noneMatch(m -> m.content().contains("4417")), after.toString());
        RecallResult coffee = memory.recall(namespace, "How do I take my coffee?");
        assertTrue(coffee.memories().stream().anyMatch(m -> m.content().contains("black")), coffee.toString());

        Stats stats = memory.stats(namespace);
        assertTrue(stats.byStatus().getOrDefault("forgotten", 0) >= 1, stats.toString());
        assertTrue(stats.byStatus().getOrDefault("active", 0) >= 1, stats.toString());
    }

    @Test
    void hardForgetOfTheWholeNamespaceLeavesNothing() {
        TurnReceipt receipt = memory.retain(namespace, "The office wifi password is hunter2.", "erin", "s1");
        memory.recall(namespace, RecallRequest.of("wifi password").waitFor(receipt));
        ForgetResult erased = memory.forget(namespace, ForgetRequest.everything().hard(true).reason("test"));
        assertEquals("erase", erased.command());
        assertTrue(erased.wholeNamespace());
        assertTrue(erased.applied());
        RecallResult after = memory.recall(namespace, RecallRequest.of("wifi password").includeHistory(true));
        assertEquals(List.of(), after.memories());
        assertEquals(0, memory.stats(namespace).memories());
    }

    @Test
    void forgetWithoutWaitingReturnsBeforeTheViewsApplyIt() {
        ForgetResult queued = memory.forget(namespace, ForgetRequest.byIds("m_unknown").waitApplied(false));
        assertEquals("forget", queued.command());
        assertTrue(!queued.applied(), "sent as wait=false");
        // What it took is known only once applied; the command itself is in the log.
        assertEquals(List.of(), queued.memoryIds());
        assertTrue(queued.offset() >= 0, queued.toString());
    }

    @Test
    void inspectShowsProvenance() {
        String eventId = "turn-" + UUID.randomUUID();
        Instant said = Instant.parse("2024-05-01T12:00:00Z");
        TurnReceipt receipt = memory.retain(namespace,
                Turn.of("I am allergic to peanuts.", "carol", "lunch-1").eventTime(said).eventId(eventId)
                        .metadata(Map.of("channel", "test")));
        assertEquals(eventId, receipt.eventId());
        RecallResult result = memory.recall(namespace, RecallRequest.of("What am I allergic to?").waitFor(receipt));
        RecalledMemory hit = result.memories().stream()
                .filter(m -> m.content().contains("peanuts"))
                .findFirst()
                .orElseThrow(() -> new AssertionError("not recalled: " + result));

        Memory inspected = memory.inspect(namespace, hit.id());
        assertEquals(hit.id(), inspected.id());
        assertEquals("active", inspected.status());
        SourceTurn source = inspected.provenance().stream()
                .filter(turn -> turn.eventId().equals(eventId))
                .findFirst()
                .orElseThrow(() -> new AssertionError("provenance lacks " + eventId + ": " + inspected));
        assertEquals("lunch-1", source.sessionId());
        assertEquals("carol", source.speaker());
        assertEquals(said, source.eventTime());
        // Where the turn sits in the input log: the retain receipt's place, and the memory's origin.
        assertEquals(receipt.topic(), source.topic());
        assertEquals(receipt.partition(), source.partition());
        assertEquals(receipt.offset(), source.offset());
        assertEquals(receipt.offset(), inspected.originOffset());
        assertTrue(inspected.history().stream().anyMatch(entry -> entry.change().equals("created")));
    }

    @Test
    void aRedactionPolicyHidesEmailsAndAnAdminCanRevealThem() {
        TurnReceipt policy = memory.setPolicy(namespace, new RedactionSettings(true, List.of("EMAIL"), null));
        TurnReceipt receipt = memory.retain(namespace, "Send the invoices to ap@example.org please.", "dan", "s1");
        assertTrue(receipt.offset() > policy.offset());
        RecallResult result = memory.recall(namespace, RecallRequest.of("Where do invoices go?").waitFor(receipt));
        RecalledMemory hit = result.memories().stream()
                .filter(m -> m.content().contains("[EMAIL_1]"))
                .findFirst()
                .orElseThrow(() -> new AssertionError("no redacted memory: " + result));
        assertTrue(!result.context().contains("ap@example.org"), result.context());
        assertTrue(memory.inspectRevealed(namespace, hit.id()).content().contains("ap@example.org"));
        // Recorded by the pipeline before the turn after it was prepared, so visible now.
        assertEquals(List.of("EMAIL"), memory.policy(namespace).redaction().kinds());
    }

    @Test
    void statsCountWhatWasRetained() {
        assertEquals(0, memory.stats(namespace).memories());
        TurnReceipt receipt =
                memory.retain(namespace, "We deploy on Fridays only after the 2pm freeze.", "dan", "s1");
        memory.recall(namespace, RecallRequest.of("when do we deploy?").waitFor(receipt).reinforce(false));
        Stats stats = memory.stats(namespace);
        assertEquals(namespace, stats.namespace());
        assertTrue(stats.memories() >= 1, stats.toString());
        int byStatus = stats.byStatus().values().stream().mapToInt(Integer::intValue).sum();
        assertEquals(stats.memories(), byStatus);
    }

    @Test
    void invalidInputIsA422NamingTheField() {
        HindsightException empty = assertThrows(
                HindsightException.class, () -> memory.retain(namespace, "", "eve", "s1"));
        assertEquals(422, empty.status());
        assertEquals("text", empty.field());
        assertTrue(empty.getMessage().startsWith("text: "), empty.getMessage());
        assertEquals("text", empty.errors().get(0).field());

        HindsightException limit = assertThrows(
                HindsightException.class, () -> memory.recall(namespace, RecallRequest.of("x").limit(0)));
        assertEquals(422, limit.status());
        assertEquals("limit", limit.field());

        HindsightException badNamespace =
                assertThrows(HindsightException.class, () -> memory.stats("not a namespace!"));
        assertEquals(422, badNamespace.status());
        assertEquals("namespace", badNamespace.field());
    }

    @Test
    void anUnknownMemoryIsA404() {
        HindsightException missing = assertThrows(
                HindsightException.class, () -> memory.inspect(namespace, "m_does_not_exist"));
        assertEquals(404, missing.status());
        assertEquals("memory_id", missing.field());
    }

    @Test
    void withoutTheApiKeyTheApiRefuses() {
        String key = System.getenv(HindsightClient.API_KEY_VARIABLE);
        org.junit.jupiter.api.Assumptions.assumeTrue(
                key != null && !key.isBlank(), "no HINDSIGHT_API_KEY: the API takes no key");
        HindsightClient anonymous = HindsightClient.builder(memory.baseUrl().toString()).build();
        HindsightException refused = assertThrows(HindsightException.class, () -> anonymous.stats(namespace));
        assertEquals(401, refused.status());
    }

    /**
     * Every record's JSON fields are exactly its OpenAPI schema's properties, every schema has a
     * record, and a primitive component is never a property the API may leave out or send as null
     * (Jackson refuses to read a null into a primitive).
     */
    @Test
    void recordsMatchTheRunningApiSchema() throws Exception {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(memory.baseUrl() + "/openapi.json"));
        String key = System.getenv(HindsightClient.API_KEY_VARIABLE);
        if (key != null && !key.isBlank()) {
            request.header("authorization", "Bearer " + key);
        }
        String body = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build()
                .send(request.build(), HttpResponse.BodyHandlers.ofString())
                .body();
        JsonNode schemas = JsonMapper.builder().build().readTree(body).path("components").path("schemas");
        Map<String, Class<? extends Record>> records = Map.ofEntries(
                Map.entry("TurnIn", Turn.class),
                Map.entry("TurnReceipt", TurnReceipt.class),
                Map.entry("Receipt", Receipt.class),
                Map.entry("RecallIn", RecallRequest.class),
                Map.entry("RecallResult", RecallResult.class),
                Map.entry("RecallTrace", RecallTrace.class),
                Map.entry("RecalledMemory", RecalledMemory.class),
                Map.entry("PathEvidence", PathEvidence.class),
                Map.entry("SourceTurn", SourceTurn.class),
                Map.entry("HistoryEntry", HistoryEntry.class),
                Map.entry("MemoryOut", Memory.class),
                Map.entry("Association", Association.class),
                Map.entry("Triplet", Triplet.class),
                Map.entry("Slot", Slot.class),
                Map.entry("AttributeShare", AttributeShare.class),
                Map.entry("ForgetIn", ForgetRequest.class),
                Map.entry("ForgetOut", ForgetResult.class),
                Map.entry("StatsOut", Stats.class),
                Map.entry("PolicyIn", Policy.class),
                Map.entry("RedactionSettings", RedactionSettings.class),
                Map.entry("Health", Health.class),
                Map.entry("Ready", Ready.class),
                Map.entry("ErrorBody", ErrorBody.class),
                Map.entry("FieldError", FieldError.class));
        List<String> drift = new ArrayList<>();
        Set<String> unmodelled = new TreeSet<>(schemas.propertyNames());
        unmodelled.removeAll(records.keySet());
        if (!unmodelled.isEmpty()) {
            drift.add("schemas without a record: " + unmodelled);
        }
        for (Map.Entry<String, Class<? extends Record>> pair : new TreeMap<>(records).entrySet()) {
            String name = pair.getValue().getSimpleName() + " vs " + pair.getKey();
            JsonNode schema = schemas.path(pair.getKey());
            if (!schema.isObject()) {
                drift.add(name + ": the API has no such schema");
                continue;
            }
            JsonNode properties = schema.path("properties");
            Set<String> required = new TreeSet<>();
            schema.path("required").forEach(field -> required.add(field.asString()));
            Map<String, Class<?>> components = jsonComponents(pair.getValue());
            Set<String> missing = new TreeSet<>(properties.propertyNames());
            missing.removeAll(components.keySet());
            Set<String> extra = new TreeSet<>(components.keySet());
            extra.removeAll(properties.propertyNames());
            if (!missing.isEmpty() || !extra.isEmpty()) {
                drift.add(name + ": missing " + missing + ", not in the API " + extra);
            }
            components.forEach((field, type) -> {
                JsonNode property = properties.path(field);
                boolean mayBeAbsent = !required.contains(field) && !property.has("default");
                if (type.isPrimitive() && property.isObject() && (mayBeAbsent || nullable(property))) {
                    drift.add(name + ": " + field + " is a " + type + " but the API may send no value");
                }
            });
        }
        assertEquals(List.of(), drift);
    }

    private static boolean nullable(JsonNode property) {
        for (JsonNode option : property.path("anyOf")) {
            if ("null".equals(option.path("type").asString())) {
                return true;
            }
        }
        return false;
    }

    /** A record's JSON field names, as the client's mapper names them, with their Java types. */
    private static Map<String, Class<?>> jsonComponents(Class<? extends Record> type) {
        var snake = new SnakeCase();
        Map<String, Class<?>> fields = new TreeMap<>();
        for (var component : type.getRecordComponents()) {
            JsonProperty renamed = component.getAccessor().getAnnotation(JsonProperty.class);
            fields.put(renamed != null ? renamed.value() : snake.of(component.getName()), component.getType());
        }
        return fields;
    }

    /** The client's naming strategy, to name record components as the client sends them. */
    private static final class SnakeCase extends PropertyNamingStrategies.SnakeCaseStrategy {
        private static final long serialVersionUID = 1L;

        String of(String name) {
            return translate(name);
        }
    }
}
