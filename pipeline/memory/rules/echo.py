"""Topic echoes: a turn that only acknowledges what a memory already says adds nothing to it.

"ok ok parent-teacher meeting, got it", "👍 deploy stuff noted", "胃镜的事收到啦" name the topic
of an earlier turn, so the encoder and the keywords place them right next to the fact they
acknowledge, and stored they compete with it on recall. What tells them apart is the bank, which
a stateless ``prepare`` does not see: take out the acknowledgement (thanks, "noted", "收到",
emoji, the placeholder "thing"/"的事"), and what is left of the turn's words, numbers and dates
is all in one memory that is already there. A turn is an echo only when

- it acknowledges something (a small-talk phrase, an acknowledgement or an emoji was taken out):
  a bare restatement of a fact is a confirmation, which the duplicate rule handles;
- every content term left (stemmed English words and numbers, jieba's Chinese words) is covered
  by a single current memory: a new value ("moved to 6pm", "改到下周三") is a term no memory
  has, so the turn is a new statement;
- nothing left is negated ("not", "不", "没") and it has no verb of its own ("billing is ok",
  "计费系统还行"): a negation or a predicate turns a topic into news;
- the memory is a statement: agreeing to a question ("ok, Postgres then") answers it; and
- the learned classifier, when it judged the turn, is not sure it is a memory
  (keep probability below :data:`ECHO_MAX_KEEP`).

Pure and deterministic: the same text, probability and memories give the same answer (I2).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.memory.rules.classify import has_small_talk, strip_small_talk
from pipeline.memory.rules.text import normalise
from pipeline.recall.lexical import is_cjk, tokenize
from schemas.memory import MemoryRecord

# A turn the classifier keeps with at least this probability is a statement, whatever its words.
ECHO_MAX_KEEP = 0.9

# Acknowledgements beyond classify's small talk: formulas of having heard ("noted", "已知悉",
# "知道啦"), words about the telling itself ("the reminder", "告知"), apologies and emoji. Verbs
# of knowing count only in their formulaic forms: "I understand French" is a statement.
_ACKNOWLEDGEMENT = re.compile(
    r"\b(?:heads[- ]?up|(?:duly )?noted|understood|(?:much )?appreciated|will do|roger|"
    r"copy that|makes sense|good to know|gotcha|reminders?|updates?|info|information|classic|"
    r"sorry|apologies|(?<=thx )4|(?<=thanks )4|(?<=ty )4)\b|"
    r"提醒|告知|知悉|收到|(?:谢谢|感谢|多谢)关心|(?:知道|明白|懂|了解|记住|记下)[了啦啰喽]|辛苦|抱歉|"
    r"不好意思",
    re.I,
)
# Words that frame or stand in for the topic ("regarding …", "the car thing", "胃镜的事"):
# taken out like the acknowledgement, but they are no sign of one ("周日去买东西" is news).
_PLACEHOLDER = re.compile(
    r"\b(?:regarding|again|stuff|things?)\b|关于|对于|已经?|的事情?|这事|那事|这件事|那件事|东西",
    re.I,
)
# Polite formulas that merely contain a negation ("no problem", "不客气") are not one.
_POLITE_NEGATIVE = re.compile(
    r"\bno (?:problem|worries)\b|\bnot at all\b|没问题|没事|没关系|不客气|不用谢|不好意思", re.I
)
# A verb of its own makes the turn a statement about the topic ("billing is ok", "the hotel
# looks great", "计费系统还行"), whatever small-talk word it uses; an acknowledgement names the
# topic without one. English: auxiliaries and linking verbs (a closed class); Chinese, which
# needs no copula before an adjective: a degree adverb before an evaluation.
_PREDICATE = re.compile(
    r"\b(?:is|are|was|were|am|be|been|being|has|have|had|will|would|can|could|shall|should|"
    r"must|may|might|do|does|did|looks?|looked|seems?|seemed|feels?|felt)\b|'(?:re|m|ll|ve|d)\b|"
    r"(?:[挺很还真太蛮]|非常|比较)(?:好|行|可以|不错|没问题)",
    re.I,
)
_NEGATION = re.compile(
    r"\b(?:not|no|never|nothing|none|nor|cannot|without|cancel\w*|postpone\w*)\b|n't\b|"
    r"[不没别未勿无非]|取消|推迟|延期",
    re.I,
)


@dataclass(frozen=True)
class Residue:
    """What is left of a turn once its acknowledgement is taken out."""

    terms: tuple[str, ...]  # content terms (stemmed English words, numbers, Chinese words)
    acknowledges: bool  # a small-talk phrase, an acknowledgement word or a symbol was taken out
    negated: bool
    asserts: bool  # what is left has a verb of its own (_PREDICATE)


def _has_symbol(text: str) -> bool:
    return any(unicodedata.category(ch) in {"So", "Sk", "Cs"} for ch in text)


def residue(text: str) -> Residue:
    """The content terms of ``text`` without its acknowledgement, and what was taken out."""
    folded = normalise(text)
    acknowledges = bool(
        _ACKNOWLEDGEMENT.search(folded) or has_small_talk(folded) or _has_symbol(folded)
    )
    unacknowledged = _ACKNOWLEDGEMENT.sub(" ", folded)
    rest = strip_small_talk(_PLACEHOLDER.sub(" ", unacknowledged))
    negated = bool(_NEGATION.search(_POLITE_NEGATIVE.sub(" ", folded)))
    # Read before small talk is taken out: "ok" and "还行" are what the predicate says.
    asserts = bool(_PREDICATE.search(unacknowledged))
    return Residue(tuple(dict.fromkeys(tokenize(rest))), acknowledges, negated, asserts)


def covers(content: str, terms: Iterable[str]) -> bool:
    """Every term is in ``content``: as one of its terms, or (Chinese, whose words jieba may cut
    differently in another sentence) as part of its text."""
    own = set(tokenize(content))
    text = normalise(content)
    return all(term in own or (is_cjk(term) and term in text) for term in terms)


def echoed(
    text: str, keep_probability: float | None, earlier: Iterable[MemoryRecord]
) -> str | None:
    """The id of the memory that ``text`` only acknowledges, or None when the turn adds something.

    ``earlier`` are the current memories it may echo, best candidates first; the first that covers
    the turn's content terms is the one it echoes. A turn with no content terms left at all (only
    acknowledgement) echoes the first of them.
    """
    if keep_probability is not None and keep_probability >= ECHO_MAX_KEEP:
        return None
    left = residue(text)
    if not left.acknowledges or left.negated or left.asserts:
        return None
    for memory in earlier:
        # "ok, Postgres for billing then" after "Shall we use Postgres for billing?" answers it.
        if not _is_question(memory.content) and covers(memory.content, left.terms):
            return memory.id
    return None


def _is_question(content: str) -> bool:
    return content.rstrip().endswith(("?", "？")) or content.rstrip(" 。.!！").endswith("吗")
