"""The attribute inventory and its labelled statements (``corpus/*.jsonl``, CORPUS.md).

Each file is one writer's: attribute lines (id, description, single_valued), then for each
attribute its statements and questions, then statements that give no attribute's value
(attribute ``none``). A later release of a domain is a file of its own named ``<domain>-<release>``
(``hb-r3.jsonl``): more statements of that domain's attributes, by new writers. This module reads
and checks them; nothing here embeds or trains.

The held-back quarter: within each (attribute, language, kind, release) stratum the texts are
ordered by ``sha256(SEED + id)`` and every fourth, from the first, is held back. A release is
split on its own, so adding one never moves an older release's texts across the split. The
quarter is only ever scored (``evaluate``); every choice is made on the other three quarters.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson

from pipeline.models.attributes import NONE_LABEL

CORPUS_DIR = Path(__file__).with_name("corpus")
SEED = "hindsight-slot-attributes/"
HELD_BACK_EVERY = 4
LANGS = ("en", "zh")

TextKind = Literal["statement", "question"]


class CorpusError(ValueError):
    """A corpus line that does not parse or breaks the corpus' shape; names file and line."""


@dataclass(frozen=True)
class Attribute:
    id: str
    description: str
    single_valued: bool
    writer: str


@dataclass(frozen=True)
class Example:
    """One labelled text: a statement giving a value of ``attribute`` (or none), or a question
    asking for its current value."""

    id: str  # "<file name>-<sha256(text)[:12]>": stable whatever the file's order
    writer: str  # the domain ("hb"): every release of it, so leaving a writer out leaves out
    # every statement of its attributes
    attribute: str
    lang: str
    kind: TextKind
    text: str
    release: str = ""  # "" for the first files of a domain, else the file name's suffix ("r3")


@dataclass(frozen=True)
class Corpus:
    attributes: dict[str, Attribute]
    examples: list[Example]

    def digest(self) -> str:
        """A hash of everything training reads (the inventory and every labelled text)."""
        rows = sorted(
            [orjson.dumps(a.__dict__) for a in self.attributes.values()]
            + [orjson.dumps(_fields(e)) for e in self.examples]
        )
        return hashlib.sha256(b"\n".join(rows)).hexdigest()


def _fields(example: Example) -> dict[str, object]:
    """An example's fields as the digest reads them; a first release's without ``release``, so
    its digest is the one it had before releases existed."""
    fields = dict(example.__dict__)
    if not example.release:
        del fields["release"]
    return fields


def _example_id(writer: str, text: str) -> str:
    return f"{writer}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def read_writer(path: Path) -> tuple[list[Attribute], list[Example]]:
    """One writer's file, checked line by line."""
    writer, _, release = path.stem.partition("-")
    attributes: list[Attribute] = []
    examples: list[Example] = []
    for number, raw in enumerate(path.read_bytes().splitlines(), 1):
        if not raw.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            row = orjson.loads(raw)
        except orjson.JSONDecodeError as error:
            raise CorpusError(f"{where}: not JSON ({error})") from None
        kind = row.get("type")
        if kind == "attribute":
            if release:
                raise CorpusError(f"{where}: a later release adds statements, not attributes")
            if not isinstance(row.get("single_valued"), bool):
                raise CorpusError(f"{where}: single_valued must be true or false")
            attributes.append(
                Attribute(str(row["id"]), str(row["description"]), row["single_valued"], writer)
            )
        elif kind in ("statement", "question"):
            lang, text = row.get("lang"), str(row.get("text", "")).strip()
            if lang not in LANGS:
                raise CorpusError(f"{where}: lang {lang!r}, expected one of {LANGS}")
            if not text:
                raise CorpusError(f"{where}: empty text")
            attribute = str(row.get("attribute", ""))
            if kind == "question" and attribute == NONE_LABEL:
                raise CorpusError(f"{where}: a question asks for an attribute, not {NONE_LABEL!r}")
            examples.append(
                Example(_example_id(path.stem, text), writer, attribute, lang, kind, text, release)
            )
        else:
            raise CorpusError(f"{where}: type {kind!r}, expected attribute, statement or question")
    return attributes, examples


def load_corpus(directory: Path = CORPUS_DIR) -> Corpus:
    """Every writer's file, checked as a whole: unique ids, known attributes, no repeated text."""
    attributes: dict[str, Attribute] = {}
    examples: list[Example] = []
    for path in sorted(directory.glob("*.jsonl")):
        found, said = read_writer(path)
        for attribute in found:
            if attribute.id in attributes or attribute.id == NONE_LABEL:
                raise CorpusError(f"{path.name}: attribute id {attribute.id!r} is not unique")
            attributes[attribute.id] = attribute
        examples.extend(said)
    unknown = sorted({e.attribute for e in examples} - set(attributes) - {NONE_LABEL})
    if unknown:
        raise CorpusError(f"statements of unknown attributes: {unknown[:5]}")
    seen: dict[str, Example] = {}
    unique: list[Example] = []
    for example in examples:
        # The same text written twice is one example (its first label); the same text under two
        # labels would teach nothing.
        if example.id in seen:
            if seen[example.id].attribute != example.attribute:
                raise CorpusError(
                    f"{example.text!r}: labelled both {seen[example.id].attribute} "
                    f"and {example.attribute}"
                )
            continue
        seen[example.id] = example
        unique.append(example)
    return Corpus(attributes, unique)


def _ranks(examples: Iterable[Example], seed: str) -> dict[str, int]:
    strata: dict[tuple[str, str, str, str], list[Example]] = defaultdict(list)
    for example in examples:
        strata[(example.attribute, example.lang, example.kind, example.release)].append(example)
    rank: dict[str, int] = {}
    for members in strata.values():
        ordered = sorted(members, key=lambda e: hashlib.sha256((seed + e.id).encode()).digest())
        rank.update((example.id, position) for position, example in enumerate(ordered))
    return rank


def split(examples: Sequence[Example]) -> tuple[list[Example], list[Example]]:
    """(training three quarters, held-back quarter), stratified and fixed by the seed."""
    rank = _ranks(examples, SEED)
    held = [e for e in examples if rank[e.id] % HELD_BACK_EVERY == 0]
    kept = [e for e in examples if rank[e.id] % HELD_BACK_EVERY != 0]
    return kept, held
