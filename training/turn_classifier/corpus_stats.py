"""Validate the labelled turn corpus and print its counts.

    python training/turn_classifier/corpus_stats.py [corpus.jsonl] [--markdown]

Exits 1 with a message naming the line and the field when a line is malformed, carries an
unknown label/lang/register/context, repeats an id, or repeats (or nearly repeats) the text of
an earlier line; also exits 1, after the tables, when the corpus is too small or unbalanced
(see balance_problems). The held-out evaluation quarter is chosen by the training script from a hash
of the id, so nothing here splits the data.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

CORPUS_PATH = Path(__file__).with_name("corpus.jsonl")

# Turns worth nothing as memory come first; the memory kinds follow.
NON_MEMORY_LABELS = ("small_talk", "filler", "greeting", "thanks", "question")
MEMORY_LABELS = (
    "preference",
    "fact",
    "task_state",
    "procedure",
    "decision",
    "emotion",
)
LABELS = NON_MEMORY_LABELS + MEMORY_LABELS
LANGS = ("en", "zh", "mixed")
REGISTERS = ("casual", "terse", "formal", "typo", "mixed")
CONTEXTS = (
    "coding_assistant",
    "work_team",
    "personal_assistant",
    "friends_chat",
    "customer_support",
    "health_wellbeing",
    "study",
)
FIELDS = ("id", "text", "label", "lang", "register", "context")
ID_PREFIX = {"en": "en", "zh": "zh", "mixed": "mx"}
MAX_TEXT_CHARS = 400

# What a shippable corpus must have (tests/unit/test_turn_corpus.py holds the file to these).
MIN_TURNS = 2000
MIN_PER_LABEL = 120
MIN_SHARE_PER_LANGUAGE = 0.35  # English and Chinese each; code-switched turns come on top
NON_MEMORY_SHARE = (0.35, 0.45)  # real chats are full of chatter, thanks and questions

# Two texts whose character-trigram sets overlap this much are the same turn reworded slightly
# (a changed name or number); the corpus should teach variety, not repeat a template.
NEAR_DUPLICATE_JACCARD = 0.75
NEAR_DUPLICATE_MIN_CHARS = 16  # shorter texts are compared exactly ("ok" vs "okay" are distinct)

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")
_ID = re.compile(r"^(en|zh|mx)-(\d{4,5})$")
_NOT_WORD = re.compile(r"[\W_]+")


class CorpusError(ValueError):
    """A corpus line that breaks the schema; the message names the line and the field."""


@dataclass(frozen=True)
class Turn:
    id: str
    text: str
    label: str
    lang: str
    register: str
    context: str
    line: int


def normalise(text: str) -> str:
    """Case, width and punctuation folded away: what counts as "the same text"."""
    return _NOT_WORD.sub("", unicodedata.normalize("NFKC", text).casefold())


def _shingles(normalised: str) -> frozenset[str]:
    return frozenset(normalised[i : i + 3] for i in range(len(normalised) - 2))


def parse_line(raw: str, line: int) -> Turn:
    """One JSON line -> a Turn, or CorpusError naming the field that is wrong."""
    where = f"line {line}"
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as error:
        raise CorpusError(f"{where}: not valid JSON ({error.msg})") from error
    if not isinstance(record, dict):
        raise CorpusError(f"{where}: expected a JSON object")
    missing = [name for name in FIELDS if name not in record]
    if missing:
        raise CorpusError(f"{where}: missing field {missing[0]!r}")
    extra = sorted(set(record) - set(FIELDS))
    if extra:
        raise CorpusError(f"{where}: unknown field {extra[0]!r}")
    for name in FIELDS:
        if not isinstance(record[name], str) or not record[name]:
            raise CorpusError(f"{where}: field {name!r} must be a non-empty string")
    turn = Turn(line=line, **record)
    where = f"line {line} ({turn.id})"
    for name, allowed in (
        ("label", LABELS),
        ("lang", LANGS),
        ("register", REGISTERS),
        ("context", CONTEXTS),
    ):
        value = getattr(turn, name)
        if value not in allowed:
            raise CorpusError(f"{where}: field {name!r} has unknown value {value!r}")
    match = _ID.match(turn.id)
    if match is None:
        raise CorpusError(f"{where}: field 'id' must look like en-0001, zh-0001 or mx-0001")
    if match.group(1) != ID_PREFIX[turn.lang]:
        raise CorpusError(
            f"{where}: field 'id' prefix {match.group(1)!r} does not match lang {turn.lang!r}"
        )
    if (turn.lang == "mixed") != (turn.register == "mixed"):
        raise CorpusError(f"{where}: field 'register' is 'mixed' exactly when lang is 'mixed'")
    if turn.text != turn.text.strip() or "\n" in turn.text:
        raise CorpusError(f"{where}: field 'text' has surrounding whitespace or a newline")
    if len(turn.text) > MAX_TEXT_CHARS:
        raise CorpusError(f"{where}: field 'text' is longer than {MAX_TEXT_CHARS} characters")
    has_cjk, has_latin = bool(_CJK.search(turn.text)), bool(_LATIN.search(turn.text))
    if turn.lang == "en" and has_cjk:
        raise CorpusError(f"{where}: field 'lang' is 'en' but the text has Chinese characters")
    if turn.lang == "zh" and not has_cjk:
        raise CorpusError(f"{where}: field 'lang' is 'zh' but the text has no Chinese characters")
    if turn.lang == "mixed" and not (has_cjk and has_latin):
        raise CorpusError(f"{where}: field 'lang' is 'mixed' but the text is not code-switched")
    return turn


def check_unique(turns: Sequence[Turn]) -> None:
    """Ids unique; texts neither equal after normalise() nor near-duplicates of each other."""
    seen_ids: dict[str, int] = {}
    seen_texts: dict[str, Turn] = {}
    shingles: list[frozenset[str]] = []
    index: defaultdict[str, list[int]] = defaultdict(list)
    for position, turn in enumerate(turns):
        if turn.id in seen_ids:
            raise CorpusError(
                f"line {turn.line}: field 'id' {turn.id!r} repeats line {seen_ids[turn.id]}"
            )
        seen_ids[turn.id] = turn.line
        key = normalise(turn.text)
        if not key:
            raise CorpusError(f"line {turn.line} ({turn.id}): field 'text' has no letters")
        if key in seen_texts:
            earlier = seen_texts[key]
            raise CorpusError(
                f"line {turn.line} ({turn.id}): duplicate text, same as line {earlier.line} "
                f"({earlier.id}): {turn.text!r}"
            )
        seen_texts[key] = turn
        grams = _shingles(key) if len(key) >= NEAR_DUPLICATE_MIN_CHARS else frozenset()
        shingles.append(grams)
        shared: Counter[int] = Counter()
        for gram in grams:
            shared.update(index[gram])
        for other, overlap in shared.items():
            jaccard = overlap / len(grams | shingles[other])
            if jaccard >= NEAR_DUPLICATE_JACCARD:
                earlier = turns[other]
                raise CorpusError(
                    f"line {turn.line} ({turn.id}): near-duplicate text (trigram Jaccard "
                    f"{jaccard:.2f}) of line {earlier.line} ({earlier.id}): "
                    f"{turn.text!r} ~ {earlier.text!r}"
                )
        for gram in grams:
            index[gram].append(position)


def parse_lines(lines: Iterable[str]) -> list[Turn]:
    turns = [parse_line(raw, number) for number, raw in enumerate(lines, 1) if raw.strip()]
    check_unique(turns)
    return turns


def load_corpus(path: Path = CORPUS_PATH) -> list[Turn]:
    """Every turn of the corpus file, validated; CorpusError on the first bad line."""
    if not path.is_file():
        raise CorpusError(f"corpus file not found: {path}")
    with path.open(encoding="utf-8") as handle:
        return parse_lines(handle)


# Every (language, register) cell a label must fill: each plain register in English and in
# Chinese, and code-switching, which is its own language and register.
LANG_REGISTERS = [(lang, register) for lang in ("en", "zh") for register in REGISTERS[:4]]
LANG_REGISTERS.append(("mixed", "mixed"))


def coverage_gaps(turns: Sequence[Turn]) -> list[str]:
    """Label x (language, register) and label x context cells with no turn at all."""
    styles = {(t.label, t.lang, t.register) for t in turns}
    contexts = {(t.label, t.context) for t in turns}
    gaps = [
        f"{label} has no turn with lang={lang} register={register}"
        for label in LABELS
        for lang, register in LANG_REGISTERS
        if (label, lang, register) not in styles
    ]
    gaps += [
        f"{label} has no turn with context={context}"
        for label in LABELS
        for context in CONTEXTS
        if (label, context) not in contexts
    ]
    return gaps


def balance_problems(turns: Sequence[Turn]) -> list[str]:
    """Everything that keeps a valid corpus from being a usable one; empty when it is."""
    total = len(turns)
    if total == 0:
        return ["the corpus has no turns"]
    problems = []
    if total < MIN_TURNS:
        problems.append(f"{total} turns, fewer than {MIN_TURNS}")
    labels = Counter(t.label for t in turns)
    problems += [
        f"{label} has {labels[label]} turns, fewer than {MIN_PER_LABEL}"
        for label in LABELS
        if labels[label] < MIN_PER_LABEL
    ]
    langs = Counter(t.lang for t in turns)
    problems += [
        f"{lang} is {langs[lang] / total:.0%} of the turns, less than {MIN_SHARE_PER_LANGUAGE:.0%}"
        for lang in ("en", "zh")
        if langs[lang] / total < MIN_SHARE_PER_LANGUAGE
    ]
    low, high = NON_MEMORY_SHARE
    share = sum(t.label in NON_MEMORY_LABELS for t in turns) / total
    if not low <= share <= high:
        problems.append(f"non-memory labels are {share:.0%} of the turns, not {low:.0%}-{high:.0%}")
    return problems + coverage_gaps(turns)


def count_table(turns: Sequence[Turn]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: label x (language, register), language totals, overall total."""
    cells = Counter((t.label, t.lang, t.register) for t in turns)
    by_lang = Counter((t.label, t.lang) for t in turns)
    header = ["label"] + [f"{lang}/{register}" for lang, register in LANG_REGISTERS[:-1]]
    header += ["mixed", "en", "zh", "total"]
    rows = []
    for label in [*LABELS, "TOTAL"]:
        chosen = list(LABELS) if label == "TOTAL" else [label]
        row = [label]
        row += [str(sum(cells[(x, lang, reg)] for x in chosen)) for lang, reg in LANG_REGISTERS]
        row += [str(sum(by_lang[(x, lang)] for x in chosen)) for lang in ("en", "zh")]
        row.append(str(sum(by_lang[(x, lang)] for x in chosen for lang in LANGS)))
        rows.append(row)
    return header, rows


def context_table(turns: Sequence[Turn]) -> tuple[list[str], list[list[str]]]:
    cells = Counter((t.label, t.context) for t in turns)
    header = ["label", *CONTEXTS]
    rows = [[label] + [str(cells[(label, c)]) for c in CONTEXTS] for label in LABELS]
    return header, rows


def render(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]

    def line(row: list[str]) -> str:
        first, *rest = row
        cells = [first.ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(rest, widths[1:], strict=True)]
        return "  ".join(cells)

    return "\n".join(line(row) for row in table)


def summary(turns: Sequence[Turn]) -> str:
    total = len(turns)
    langs = Counter(t.lang for t in turns)
    non_memory = sum(1 for t in turns if t.label in NON_MEMORY_LABELS)
    words = sorted(len(t.text.split()) if t.lang == "en" else len(t.text) for t in turns)
    parts = [f"{total} turns"]
    parts += [f"{lang} {langs[lang]} ({langs[lang] / total:.0%})" for lang in LANGS]
    parts.append(f"non-memory labels {non_memory} ({non_memory / total:.0%})")
    parts.append(f"median length {words[len(words) // 2]} (en words / zh characters)")
    return ", ".join(parts)


def main(argv: Sequence[str]) -> int:
    markdown = "--markdown" in argv
    paths = [arg for arg in argv if arg != "--markdown"]
    path = Path(paths[0]) if paths else CORPUS_PATH
    try:
        turns = load_corpus(path)
    except CorpusError as error:
        print(f"corpus_stats: {path}: {error}", file=sys.stderr)
        return 1
    if not turns:
        print(f"corpus_stats: {path}: no turns", file=sys.stderr)
        return 1
    print(summary(turns))
    print()
    print(render(*count_table(turns), markdown))
    print()
    print(render(*context_table(turns), markdown))
    problems = balance_problems(turns)
    if problems:
        print(f"\ncorpus_stats: {path}: not balanced:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
