from datetime import UTC, datetime

from pipeline.recall.context import estimate_tokens, format_context, format_line
from pipeline.recall.types import RecalledMemory


def memory(
    memory_id: str, content: str, kind: str = "preference", **changes: object
) -> RecalledMemory:
    created = datetime(2024, 5, 1, 9, tzinfo=UTC)
    fields: dict[str, object] = dict(
        id=memory_id,
        namespace="ns",
        content=content,
        region="semantic",
        kind=kind,
        importance=0.9,
        status="active",
        created_at=created,
        valid_from=created,
        score=0.8,
        relevance=0.7,
        freshness=0.9,
    )
    fields.update(changes)
    return RecalledMemory(**fields)  # type: ignore[arg-type]


def test_line_shape() -> None:
    line = format_line(memory("abcd1234ffff", "Prefers dark mode"))
    assert line == "- [2024-05-01] [preference] Prefers dark mode (mem:abcd1234)"


def test_chinese_text_gets_chinese_tags_unless_forced() -> None:
    zh = memory("beef0000", "喜欢深色模式", kind="fact")
    assert "[事实]" in format_line(zh)
    assert "[fact]" in format_line(zh, language="en")
    assert "[流程]" in format_line(
        memory("c", "deploy with make ship", kind="procedure"), language="zh"
    )


def test_long_text_is_shortened_to_the_line_limit() -> None:
    line = format_line(memory("abcd1234", "word " * 100), max_chars=200)
    assert len(line) <= 200 and line.endswith("(mem:abcd1234)") and "…" in line


def test_superseded_marker() -> None:
    line = format_line(memory("a", "uses MySQL", status="superseded", superseded_by="99887766aa"))
    assert "[superseded→mem:99887766]" in line


def test_budget_keeps_whole_lines_in_order() -> None:
    memories = [memory(f"id{n:06d}", f"memory number {n} " * 5) for n in range(20)]
    block = format_context(memories, max_chars=1000, memory_chars=200)
    assert len(block) <= 1000
    lines = block.split("\n")
    assert lines[0].endswith("(mem:id000000)") and 1 < len(lines) < 20
    assert format_context(memories, max_chars=1000, max_tokens=40).count("\n") < len(lines) - 1
    assert format_context([], max_chars=1000) == ""


def test_estimate_tokens() -> None:
    assert estimate_tokens("中文四字") == 4
    assert estimate_tokens("abcdefgh") == 2
