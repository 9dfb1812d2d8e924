"""The attribute corpus: a later release of a domain adds statements and never moves the older
release's texts across the held-back split (training/attributes/corpus.py)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from training.attributes.corpus import CorpusError, load_corpus, split


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_bytes(b"\n".join(orjson.dumps(row) for row in rows) + b"\n")


def _statements(attribute: str, lang: str, texts: list[str]) -> list[dict[str, object]]:
    return [
        {"type": "statement", "attribute": attribute, "lang": lang, "text": text} for text in texts
    ]


ATTRIBUTE = {"type": "attribute", "id": "hb_gp", "description": "The GP.", "single_valued": True}


def test_a_later_release_leaves_the_older_split_as_it_was(tmp_path: Path) -> None:
    first = [f"My GP is Dr Number{n}." for n in range(9)]
    _write(tmp_path / "hb.jsonl", [ATTRIBUTE, *_statements("hb_gp", "en", first)])
    held_before = {e.id for e in split(load_corpus(tmp_path).examples)[1]}
    digest_before = load_corpus(tmp_path).digest()

    later = [f"switched surgeries, I see Dr Other{n} now" for n in range(9)]
    _write(tmp_path / "hb-r3.jsonl", _statements("hb_gp", "en", later))
    corpus = load_corpus(tmp_path)
    kept, held = split(corpus.examples)

    first_release = {e.id for e in corpus.examples if not e.release}
    assert {e.id for e in held} & first_release == held_before
    assert len(held_before) == 3  # every fourth of nine, from the first
    newer = [e for e in corpus.examples if e.release == "r3"]
    assert len(newer) == 9 and {e.writer for e in newer} == {"hb"}
    assert len([e for e in held if e.release == "r3"]) == 3
    assert len(kept) + len(held) == 18
    assert corpus.digest() != digest_before


def test_a_later_release_defines_no_attributes(tmp_path: Path) -> None:
    _write(tmp_path / "hb.jsonl", [ATTRIBUTE])
    _write(tmp_path / "hb-r3.jsonl", [{**ATTRIBUTE, "id": "hb_dentist"}])
    with pytest.raises(CorpusError, match=r"hb-r3\.jsonl:1: a later release adds statements"):
        load_corpus(tmp_path)


def test_a_later_release_names_only_known_attributes(tmp_path: Path) -> None:
    _write(tmp_path / "hb.jsonl", [ATTRIBUTE])
    _write(tmp_path / "hb-r3.jsonl", _statements("hb_dentsit", "zh", ["牙医换成了王医生"]))
    with pytest.raises(CorpusError, match=r"unknown attributes: \[.hb_dentsit.\]"):
        load_corpus(tmp_path)
