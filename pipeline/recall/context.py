"""The compact context block a prompt gets: one dated, tagged, citable line per memory.

    - [2024-05-01] [preference] Prefers dark mode in every editor (mem:abcd1234)

Language of the tags: ``language="en"`` or ``"zh"`` forces it for every line; ``None`` (the
default) decides per line from the memory text — a line whose text is mostly Chinese gets
Chinese tags ([偏好]), so a mixed bank reads naturally line by line. The date is the memory's
``created_at`` (when it was said), in its own timezone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pipeline.recall.lexical import cjk_share
from pipeline.recall.types import RecalledMemory

Language = Literal["en", "zh"]

KIND_TAGS: dict[str, dict[str, str]] = {
    "en": {
        "preference": "preference",
        "task_state": "task",
        "fact": "fact",
        "procedure": "procedure",
        "decision": "decision",
        "emotion": "emotion",
        "chit_chat": "chat",
    },
    "zh": {
        "preference": "偏好",
        "task_state": "任务",
        "fact": "事实",
        "procedure": "流程",
        "decision": "决定",
        "emotion": "情绪",
        "chit_chat": "闲聊",
    },
}
STATUS_TAGS: dict[str, dict[str, str]] = {
    "en": {"superseded": "superseded", "forgotten": "forgotten", "cold": "cold"},
    "zh": {"superseded": "已被取代", "forgotten": "已遗忘", "cold": "冷"},
}
_ELLIPSIS = "…"


def line_language(text: str, language: Language | None) -> Language:
    if language is not None:
        return language
    return "zh" if cjk_share(text) >= 0.3 else "en"


def estimate_tokens(text: str) -> int:
    """Rough token count without a tokenizer: ~4 ASCII chars a token, one per CJK char."""
    cjk = sum(1 for char in text if "\u3400" <= char <= "\u9fff" or "\uf900" <= char <= "\ufaff")
    return cjk + (len(text) - cjk + 3) // 4


def format_line(
    memory: RecalledMemory, *, max_chars: int = 200, language: Language | None = None
) -> str:
    """One memory as a line of at most ``max_chars`` characters (the text is shortened, never
    the date, tag or citation)."""
    lang = line_language(memory.content, language)
    tag = KIND_TAGS[lang].get(memory.kind, memory.kind)
    status = STATUS_TAGS[lang].get(memory.status)
    if status and memory.superseded_by:
        status += f"→mem:{memory.superseded_by[:8]}"
    head = f"- [{memory.created_at.date().isoformat()}] [{tag}]"
    if status:
        head += f" [{status}]"
    tail = f" ({memory.citation})"
    text = " ".join(memory.content.split())
    room = max_chars - len(head) - len(tail) - 1
    if room <= 0:
        return (head + tail)[:max_chars]
    if len(text) > room:
        text = text[: max(0, room - 1)].rstrip() + _ELLIPSIS
    return f"{head} {text}{tail}"


def format_context(
    memories: Sequence[RecalledMemory],
    *,
    max_chars: int = 1000,
    memory_chars: int = 200,
    max_tokens: int | None = None,
    language: Language | None = None,
) -> str:
    """Lines in the given (score) order until the char/token budget is spent; whole lines only."""
    lines: list[str] = []
    used_chars = 0
    used_tokens = 0
    for memory in memories:
        line = format_line(memory, max_chars=memory_chars, language=language)
        cost = len(line) + (1 if lines else 0)  # the newline joining it
        tokens = estimate_tokens(line) + (1 if lines else 0)
        if used_chars + cost > max_chars:
            break
        if max_tokens is not None and used_tokens + tokens > max_tokens:
            break
        lines.append(line)
        used_chars += cost
        used_tokens += tokens
    return "\n".join(lines)
