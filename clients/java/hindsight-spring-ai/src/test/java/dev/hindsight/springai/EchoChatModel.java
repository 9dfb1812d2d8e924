package dev.hindsight.springai;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.springframework.ai.chat.messages.AssistantMessage;
import org.springframework.ai.chat.model.ChatModel;
import org.springframework.ai.chat.model.ChatResponse;
import org.springframework.ai.chat.model.Generation;
import org.springframework.ai.chat.prompt.Prompt;
import reactor.core.publisher.Flux;

/** A model that remembers every prompt it saw and answers with a fixed reply (or its chunks). */
final class EchoChatModel implements ChatModel {

    final List<Prompt> seen = new CopyOnWriteArrayList<>();
    private final List<String> replyChunks;

    EchoChatModel(String... replyChunks) {
        this.replyChunks = List.of(replyChunks);
    }

    Prompt lastPrompt() {
        return seen.get(seen.size() - 1);
    }

    @Override
    public ChatResponse call(Prompt prompt) {
        seen.add(prompt);
        return new ChatResponse(List.of(new Generation(new AssistantMessage(String.join("", replyChunks)))));
    }

    @Override
    public Flux<ChatResponse> stream(Prompt prompt) {
        seen.add(prompt);
        return Flux.fromIterable(replyChunks)
                .map(chunk -> new ChatResponse(List.of(new Generation(new AssistantMessage(chunk)))));
    }
}
