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
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.stream.Collectors;
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
        assertEquals(List.of("m_unknown"), queued.memoryIds());
        assertTrue(!queued.applied(), "sent as wait=false");
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
        assertTrue(inspected.history().stream().anyMatch(entry -> entry.change().equals("created")));
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

    /** Every record's JSON fields are exactly its OpenAPI schema's properties: no drift. */
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
        Map<Class<? extends Record>, String> pairs = Map.ofEntries(
                Map.entry(Turn.class, "TurnIn"),
                Map.entry(TurnReceipt.class, "TurnReceipt"),
                Map.entry(RecallRequest.class, "RecallIn"),
                Map.entry(RecallResult.class, "RecallResult"),
                Map.entry(RecalledMemory.class, "RecalledMemory"),
                Map.entry(PathEvidence.class, "PathEvidence"),
                Map.entry(SourceTurn.class, "SourceTurn"),
                Map.entry(HistoryEntry.class, "HistoryEntry"),
                Map.entry(Memory.class, "MemoryOut"),
                Map.entry(Association.class, "Association"),
                Map.entry(Triplet.class, "Triplet"),
                Map.entry(ForgetRequest.class, "ForgetIn"),
                Map.entry(ForgetResult.class, "ForgetOut"),
                Map.entry(Stats.class, "StatsOut"),
                Map.entry(Health.class, "Health"),
                Map.entry(ErrorBody.class, "ErrorBody"),
                Map.entry(FieldError.class, "FieldError"));
        for (Map.Entry<Class<? extends Record>, String> pair : pairs.entrySet()) {
            JsonNode schema = schemas.path(pair.getValue());
            assertTrue(schema.isObject(), "the API has no schema " + pair.getValue());
            Set<String> expected = new TreeSet<>(schema.path("properties").propertyNames());
            assertEquals(expected, jsonNames(pair.getKey()),
                    pair.getKey().getSimpleName() + " vs " + pair.getValue());
        }
    }

    private static Set<String> jsonNames(Class<? extends Record> type) {
        var snake = new SnakeCase();
        return Arrays.stream(type.getRecordComponents())
                .map(component -> {
                    JsonProperty renamed = component.getAccessor().getAnnotation(JsonProperty.class);
                    return renamed != null ? renamed.value() : snake.of(component.getName());
                })
                .collect(Collectors.toCollection(TreeSet::new));
    }

    /** The client's naming strategy, to name record components as the client sends them. */
    private static final class SnakeCase extends PropertyNamingStrategies.SnakeCaseStrategy {
        private static final long serialVersionUID = 1L;

        String of(String name) {
            return translate(name);
        }
    }
}
