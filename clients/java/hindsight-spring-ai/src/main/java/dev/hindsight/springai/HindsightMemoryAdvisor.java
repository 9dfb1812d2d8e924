package dev.hindsight.springai;

import dev.hindsight.client.HindsightClient;
import dev.hindsight.client.RecallRequest;
import dev.hindsight.client.RecallResult;
import dev.hindsight.client.Role;
import dev.hindsight.client.Turn;
import dev.hindsight.client.TurnReceipt;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.springframework.ai.chat.client.ChatClientMessageAggregator;
import org.springframework.ai.chat.client.ChatClientRequest;
import org.springframework.ai.chat.client.ChatClientResponse;
import org.springframework.ai.chat.client.advisor.api.Advisor;
import org.springframework.ai.chat.client.advisor.api.AdvisorChain;
import org.springframework.ai.chat.client.advisor.api.BaseChatMemoryAdvisor;
import org.springframework.ai.chat.client.advisor.api.StreamAdvisorChain;
import org.springframework.ai.chat.memory.ChatMemory;
import org.springframework.ai.chat.messages.SystemMessage;
import org.springframework.ai.chat.model.Generation;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * Long-term memory for a Spring AI {@code ChatClient}, backed by the Hindsight HTTP API.
 *
 * <p>Before the model is called, the advisor recalls memories for the user message and appends
 * Hindsight's context block (dated, kind-tagged lines citing {@code mem:<id prefix>}) to the
 * system message; then it retains the user message as a turn. After the model answers, it
 * retains the reply as an assistant turn. The conversation id ({@link ChatMemory#CONVERSATION_ID})
 * becomes the turn's session id; the namespace (the memory bank) is configured, or given per
 * request with {@link #NAMESPACE}.
 *
 * <p>Read-your-writes: the next recall in a namespace waits until the views applied the last
 * turn this advisor retained there, so what was said one turn ago can be recalled.
 *
 * <p>The {@link RecallResult} is put in the request and response context under {@link #RECALL}
 * (full memory ids, scores, provenance), the retain receipts under {@link #RETAINED}. API
 * failures are {@link dev.hindsight.client.HindsightException}s and fail the call.
 */
public final class HindsightMemoryAdvisor implements BaseChatMemoryAdvisor {

    /** Context key: the namespace for this request, overriding the configured one. */
    public static final String NAMESPACE = "hindsight_namespace";

    /** Context key: the {@link RecallResult} whose context block went into the prompt. */
    public static final String RECALL = "hindsight_recall";

    /** Context key: the {@link TurnReceipt}s of the turns retained for this exchange. */
    public static final String RETAINED = "hindsight_retained";

    /** The block appended to the system message; {@code {memories}} is Hindsight's context. */
    public static final String DEFAULT_TEMPLATE = """
            Long-term memory about this user, most relevant first. Each line is dated, tagged \
            with its kind and ends with the memory id it came from (mem:...); cite the ids of the \
            memories you use, and ignore those that do not help.
            {memories}""";

    private static final int TRACKED_NAMESPACES = 4096;

    private final HindsightClient client;
    private final String namespace;
    private final String defaultConversationId;
    private final String userSpeaker;
    private final String assistantSpeaker;
    private final @Nullable Integer limit;
    private final Duration waitTimeout;
    private final String template;
    private final int order;
    private final Scheduler scheduler;

    // The offset of the last turn retained per namespace, for the next recall to wait for.
    private final Map<String, Long> lastOffsets = Collections.synchronizedMap(
            new LinkedHashMap<>(16, 0.75f, true) {
                private static final long serialVersionUID = 1L;

                @Override
                protected boolean removeEldestEntry(Map.Entry<String, Long> eldest) {
                    return size() > TRACKED_NAMESPACES;
                }
            });

    private HindsightMemoryAdvisor(Builder builder) {
        this.client = builder.client;
        this.namespace = builder.namespace;
        this.defaultConversationId = builder.defaultConversationId;
        this.userSpeaker = builder.userSpeaker;
        this.assistantSpeaker = builder.assistantSpeaker;
        this.limit = builder.limit;
        this.waitTimeout = builder.waitTimeout;
        this.template = builder.template;
        this.order = builder.order;
        this.scheduler = builder.scheduler;
    }

    public static Builder builder(HindsightClient client, String namespace) {
        return new Builder(client, namespace);
    }

    @Override
    public int getOrder() {
        return order;
    }

    @Override
    public Scheduler getScheduler() {
        return scheduler;
    }

    @Override
    public String getConversationId(Map<String, @Nullable Object> context) {
        Object id = context.get(ChatMemory.CONVERSATION_ID);
        return id == null ? defaultConversationId : id.toString();
    }

    private String namespaceOf(Map<String, @Nullable Object> context) {
        Object override = context.get(NAMESPACE);
        return override == null ? namespace : override.toString();
    }

    @Override
    public ChatClientRequest before(ChatClientRequest request, AdvisorChain chain) {
        String bank = namespaceOf(request.context());
        String sessionId = getConversationId(request.context());
        String userText = request.prompt().getUserMessage().getText();
        if (userText == null || userText.isBlank()) {
            return request;
        }
        RecallResult recalled = client.recall(bank, recallRequest(bank, userText));
        ChatClientRequest.Builder advised = request.mutate().context(RECALL, recalled);
        if (!recalled.context().isBlank()) {
            String block = template.replace("{memories}", recalled.context());
            advised.prompt(request.prompt().augmentSystemMessage(system -> appended(system, block)));
        }
        // Retained after the recall, so the message does not come back as its own memory.
        TurnReceipt receipt = retain(bank, Turn.of(userText, userSpeaker, sessionId).role(Role.USER));
        return advised.context(RETAINED, List.of(receipt)).build();
    }

    @Override
    public ChatClientResponse after(ChatClientResponse response, AdvisorChain chain) {
        if (response.chatResponse() == null) {
            return response;
        }
        String bank = namespaceOf(response.context());
        String sessionId = getConversationId(response.context());
        List<TurnReceipt> receipts = new ArrayList<>(retainedSoFar(response.context()));
        for (Generation generation : response.chatResponse().getResults()) {
            String reply = generation.getOutput().getText();
            if (reply != null && !reply.isBlank()) {
                Turn turn = Turn.of(reply, assistantSpeaker, sessionId).role(Role.ASSISTANT);
                receipts.add(retain(bank, turn));
            }
        }
        return response.mutate().context(RETAINED, List.copyOf(receipts)).build();
    }

    @Override
    public Flux<ChatClientResponse> adviseStream(ChatClientRequest request, StreamAdvisorChain chain) {
        // Retain the whole streamed reply once, not each chunk.
        return Mono.just(request)
                .publishOn(scheduler)
                .map(advised -> before(advised, chain))
                .flatMapMany(chain::nextStream)
                .transform(flux -> new ChatClientMessageAggregator()
                        .aggregateChatClientResponse(flux, aggregated -> after(aggregated, chain)));
    }

    private RecallRequest recallRequest(String bank, String query) {
        RecallRequest recall = RecallRequest.of(query).waitTimeout(waitTimeout);
        Long offset = lastOffsets.get(bank);
        if (offset != null) {
            recall = recall.waitFor(offset);
        }
        return limit == null ? recall : recall.limit(limit);
    }

    private TurnReceipt retain(String bank, Turn turn) {
        TurnReceipt receipt = client.retain(bank, turn);
        lastOffsets.merge(bank, receipt.offset(), Math::max);
        return receipt;
    }

    private static SystemMessage appended(SystemMessage system, String block) {
        String existing = system.getText();
        String text = existing == null || existing.isBlank() ? block : existing + "\n\n" + block;
        return system.mutate().text(text).build();
    }

    private static List<TurnReceipt> retainedSoFar(Map<String, @Nullable Object> context) {
        List<TurnReceipt> receipts = new ArrayList<>();
        if (context.get(RETAINED) instanceof List<?> list) {
            for (Object item : list) {
                if (item instanceof TurnReceipt receipt) {
                    receipts.add(receipt);
                }
            }
        }
        return receipts;
    }

    /** Configures a {@link HindsightMemoryAdvisor}. */
    public static final class Builder {
        private final HindsightClient client;
        private final String namespace;
        private String defaultConversationId = "default";
        private String userSpeaker = "user";
        private String assistantSpeaker = "assistant";
        private @Nullable Integer limit;
        private Duration waitTimeout = Duration.ofSeconds(30);
        private String template = DEFAULT_TEMPLATE;
        private int order = Advisor.DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER;
        private Scheduler scheduler = DEFAULT_SCHEDULER;

        private Builder(HindsightClient client, String namespace) {
            this.client = Objects.requireNonNull(client, "client");
            this.namespace = Objects.requireNonNull(namespace, "namespace");
        }

        /** The session id for requests without {@link ChatMemory#CONVERSATION_ID}. */
        public Builder defaultConversationId(String value) {
            this.defaultConversationId = Objects.requireNonNull(value, "defaultConversationId");
            return this;
        }

        /** The speaker name recorded for user turns (default {@code user}). */
        public Builder userSpeaker(String value) {
            this.userSpeaker = Objects.requireNonNull(value, "userSpeaker");
            return this;
        }

        public Builder assistantSpeaker(String value) {
            this.assistantSpeaker = Objects.requireNonNull(value, "assistantSpeaker");
            return this;
        }

        /** How many memories to recall; default: Hindsight cuts at the first large score gap. */
        public Builder limit(int value) {
            this.limit = value;
            return this;
        }

        /** How long a recall may wait for the previous turn to be applied (default 30 s). */
        public Builder waitTimeout(Duration value) {
            this.waitTimeout = Objects.requireNonNull(value, "waitTimeout");
            return this;
        }

        /** The block added to the system message; must contain {@code {memories}}. */
        public Builder template(String value) {
            if (!value.contains("{memories}")) {
                throw new IllegalArgumentException("template: must contain {memories}");
            }
            this.template = value;
            return this;
        }

        public Builder order(int value) {
            this.order = value;
            return this;
        }

        public Builder scheduler(Scheduler value) {
            this.scheduler = Objects.requireNonNull(value, "scheduler");
            return this;
        }

        public HindsightMemoryAdvisor build() {
            return new HindsightMemoryAdvisor(this);
        }
    }
}
