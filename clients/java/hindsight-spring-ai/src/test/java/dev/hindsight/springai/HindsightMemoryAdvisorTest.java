package dev.hindsight.springai;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hindsight.client.HindsightClient;
import dev.hindsight.client.Memory;
import dev.hindsight.client.RecallRequest;
import dev.hindsight.client.RecallResult;
import dev.hindsight.client.RecalledMemory;
import dev.hindsight.client.TurnReceipt;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.ai.chat.client.ChatClient;
import org.springframework.ai.chat.client.ChatClientResponse;
import org.springframework.ai.chat.memory.ChatMemory;
import org.springframework.ai.chat.prompt.Prompt;

/** The advisor in a real ChatClient, against a live Hindsight API; only the model is fake. */
class HindsightMemoryAdvisorTest {

    private HindsightClient memory;
    private String namespace;

    @BeforeEach
    void connect() {
        memory = LiveStack.client();
        namespace = LiveStack.freshNamespace();
    }

    private static String citation(String memoryId) {
        return "mem:" + memoryId.substring(0, 8);
    }

    private static String systemText(Prompt prompt) {
        return prompt.getSystemMessage().getText();
    }

    private RecalledMemory recalledContaining(String query, String text, TurnReceipt waitFor) {
        RecallResult result = memory.recall(namespace, RecallRequest.of(query).waitFor(waitFor).limit(10));
        return result.memories().stream()
                .filter(m -> m.content().contains(text))
                .findFirst()
                .orElseThrow(() -> new AssertionError("no memory with '" + text + "': " + result));
    }

    @Test
    void recallsIntoThePromptAndRetainsBothTurns() {
        TurnReceipt seeded = memory.retain(namespace, "My favourite code editor is Helix.", "alice", "earlier");
        RecalledMemory editor = recalledContaining("favourite code editor", "Helix", seeded);

        EchoChatModel model = new EchoChatModel("You like Helix, and Lisbon is lovely in May.");
        HindsightMemoryAdvisor advisor = HindsightMemoryAdvisor.builder(memory, namespace).build();
        ChatClient chat = ChatClient.builder(model).defaultAdvisors(advisor).build();

        ChatClientResponse response = chat.prompt()
                .system("You are a helpful assistant.")
                .user("I am flying to Lisbon next week. Which code editor do I like?")
                .advisors(a -> a.param(ChatMemory.CONVERSATION_ID, "conv-1"))
                .call()
                .chatClientResponse();

        // What the model saw: the app's system text, then the memory's text and its citation.
        String system = systemText(model.lastPrompt());
        assertTrue(system.startsWith("You are a helpful assistant."), system);
        assertTrue(system.contains("Helix"), system);
        assertTrue(system.contains(citation(editor.id())), system);
        assertEquals("I am flying to Lisbon next week. Which code editor do I like?",
                model.lastPrompt().getUserMessage().getText());

        // The full result rides along in the context, with whole ids for the citations.
        RecallResult recalled = (RecallResult) response.context().get(HindsightMemoryAdvisor.RECALL);
        assertTrue(recalled.memories().stream().anyMatch(m -> m.id().equals(editor.id())), recalled.toString());

        // Both turns were retained, in the conversation's session, with who said them.
        @SuppressWarnings("unchecked")
        List<TurnReceipt> retained = (List<TurnReceipt>) response.context().get(HindsightMemoryAdvisor.RETAINED);
        assertEquals(2, retained.size(), retained.toString());
        TurnReceipt last = retained.get(1);
        Memory userTurn = memory.inspect(namespace, recalledContaining("trip to Lisbon", "flying to Lisbon", last).id());
        assertEquals("conv-1", userTurn.provenance().get(0).sessionId());
        assertEquals("user", userTurn.provenance().get(0).speaker());
        assertEquals(retained.get(0).eventId(), userTurn.provenance().get(0).eventId());
        Memory reply = memory.inspect(namespace, recalledContaining("Lisbon in May", "lovely in May", last).id());
        assertEquals("assistant", reply.provenance().get(0).speaker());
        assertEquals(retained.get(1).eventId(), reply.provenance().get(0).eventId());
    }

    @Test
    void theNextTurnRecallsWhatWasJustSaid() {
        EchoChatModel model = new EchoChatModel("Noted.");
        HindsightMemoryAdvisor advisor = HindsightMemoryAdvisor.builder(memory, namespace).limit(5).build();
        ChatClient chat = ChatClient.builder(model).defaultAdvisors(advisor).build();

        chat.prompt().user("My badge number at the office is 58213.")
                .advisors(a -> a.param(ChatMemory.CONVERSATION_ID, "conv-2"))
                .call()
                .content();
        // No wait in the test: the advisor's recall waits for the turn it retained (read-your-writes).
        chat.prompt().user("What is my badge number?")
                .advisors(a -> a.param(ChatMemory.CONVERSATION_ID, "conv-2"))
                .call()
                .content();

        assertEquals(2, model.seen.size());
        String system = systemText(model.lastPrompt());
        assertTrue(system.contains("58213"), system);
    }

    @Test
    void aStreamedReplyIsRetainedOnceAndWhole() {
        EchoChatModel model = new EchoChatModel("Your train ", "leaves from ", "platform 9.");
        HindsightMemoryAdvisor advisor = HindsightMemoryAdvisor.builder(memory, namespace)
                .defaultConversationId("conv-3")
                .build();
        ChatClient chat = ChatClient.builder(model).defaultAdvisors(advisor).build();

        List<String> chunks = chat.prompt().user("Where does my train leave from?").stream().content()
                .collectList()
                .block();
        assertEquals(List.of("Your train ", "leaves from ", "platform 9."), chunks);

        // A second exchange waits for the streamed reply, so it can be recalled whole.
        TurnReceipt next = memory.retain(namespace, "I bought the ticket yesterday.", "user", "conv-3");
        RecalledMemory reply = recalledContaining("train platform", "Your train leaves from platform 9.", next);
        Memory inspected = memory.inspect(namespace, reply.id());
        assertEquals("assistant", inspected.provenance().get(0).speaker());
        assertEquals("conv-3", inspected.provenance().get(0).sessionId());
    }

    @Test
    void aRequestCanNameItsOwnNamespace() {
        String other = LiveStack.freshNamespace();
        TurnReceipt seeded = memory.retain(other, "I keep my spare key under the blue pot.", "bob", "s0");
        memory.recall(other, RecallRequest.of("spare key").waitFor(seeded));

        EchoChatModel model = new EchoChatModel("Under the blue pot.");
        HindsightMemoryAdvisor advisor = HindsightMemoryAdvisor.builder(memory, namespace).build();
        ChatClient chat = ChatClient.builder(model).defaultAdvisors(advisor).build();
        chat.prompt().user("Where is my spare key?")
                .advisors(a -> a.param(HindsightMemoryAdvisor.NAMESPACE, other))
                .call()
                .content();

        assertTrue(systemText(model.lastPrompt()).contains("blue pot"));
        assertEquals(0, memory.stats(namespace).memories(), "nothing went to the configured namespace");
    }
}
