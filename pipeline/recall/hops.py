"""Second-hop recall for questions whose answer is spread over several memories.

"Which cities has John been to?" is answered by "I was in Chicago", "my game in Seattle" and "I
love discovering new cities", told in different sessions. The question's own words and vector
reach one or two of them; the others resemble the answers found far more than they resemble the
question. Two pure steps over vectors the index already holds:

- ``feedback_vector``: the query moved towards its best first-pass answers (relevance feedback,
  Rocchio's rule), so a second dense pass finds memories like those answers *and* the question.
- ``diversified``: the final order re-ranked greedily (maximal marginal relevance), so the first
  places are not spent on near copies of one answer while a different answer waits below them.

Both are deterministic functions of the candidates; neither reads anything beyond them.

Three rules read the shape of a question and of the memories (``HopTuning``): a memory that
mostly asks ("What type of guitar? Been playing long?") shares a question's words and answers
nothing, so it steps back (``question_share``); a list question ("What activities ...", "What
are ...", "How many ...", 哪些, ``asks_for_list``) spreads its best answers over sessions
(``spread_over_sessions``) and, when it is about one speaker, leans harder on that speaker's
own words.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline.recall.conversation import ContextReading

FloatArray = npt.NDArray[np.floating]


def feedback_vector(query: FloatArray, seeds: FloatArray, weight: float) -> FloatArray:
    """The unit vector of ``query + weight × mean(seeds)`` (``seeds``: one unit row per answer).

    No seeds, or a weight of 0, give the query itself (normalised). A sum that cancels out
    (opposite vectors) also falls back to the query.
    """
    query = np.asarray(query, dtype=np.float32)
    norm = float(np.linalg.norm(query))
    unit = query / norm if norm > 0 else query
    if weight <= 0.0 or seeds.size == 0:
        return unit
    moved = unit + weight * np.asarray(seeds, dtype=np.float32).reshape(-1, unit.shape[0]).mean(
        axis=0
    )
    moved_norm = float(np.linalg.norm(moved))
    if moved_norm <= 1e-6:
        return unit
    return (moved / moved_norm).astype(np.float32)


def diversified(
    scores: npt.NDArray[np.float64], vectors: FloatArray, penalty: float
) -> tuple[list[int], list[float]]:
    """Greedy maximal-marginal-relevance order of candidates given best first.

    Each next place goes to the candidate with the highest ``score − penalty × (its largest
    cosine with a candidate already placed)``; ties keep the given order. Returns the order (as
    indices into ``scores``) and each placed candidate's adjusted score, made non-increasing
    (a running minimum) so gap truncation still reads a descending list. ``penalty`` 0 keeps
    the order and the scores.
    """
    count = int(scores.shape[0])
    if count == 0:
        return [], []
    if penalty <= 0.0 or count == 1:
        return list(range(count)), [float(s) for s in scores]
    raw = np.asarray(vectors, dtype=np.float64).reshape(count, -1)
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    rows = raw / np.where(norms > 0, norms, 1.0)
    similarity = np.clip(rows @ rows.T, 0.0, 1.0)
    redundancy = np.zeros(count, dtype=np.float64)
    left = np.ones(count, dtype=np.bool_)
    order: list[int] = []
    adjusted: list[float] = []
    for _ in range(count):
        objective = np.where(left, scores - penalty * redundancy, -np.inf)
        pick = int(np.argmax(objective))  # the first maximum: ties keep the given order
        value = float(objective[pick])
        adjusted.append(min(value, adjusted[-1]) if adjusted else value)
        order.append(pick)
        left[pick] = False
        redundancy = np.maximum(redundancy, similarity[pick])
    return order, adjusted


# Speakers named by their role, not a name: "what did the user say" is no question about a
# person whose name the answers leave out, and memories often say "User prefers ...".
ROLE_SPEAKERS: frozenset[str] = frozenset({"user", "assistant", "system", "tool"})


def person_names(speakers: Iterable[str]) -> list[str]:
    """The speakers that are people's names (not a role such as "user")."""
    return [speaker for speaker in speakers if speaker.strip().lower() not in ROLE_SPEAKERS]


def without_names(query: str, names: Iterable[str]) -> str:
    """The query with each name (and its first word) removed as a whole word, possessive too.

    "What are the names of John's children?" asks *about* John: the memories that answer it are
    John's own words, which rarely say "John", while the other speaker's turns address him by
    name ("Wow, John, how cute!"). As a keyword or in the query vector the name favours exactly
    those. Who is asked about is kept by the speaker focus (``speaker_focus_factor``), which
    reads the original query. Chinese names are removed as substrings. A query that would be
    left empty is returned unchanged.
    """
    stripped = query
    for name in names:
        for part in sorted(
            {name.strip(), name.strip().split(" ")[0]} - {""}, key=len, reverse=True
        ):
            if _CJK.search(part):
                stripped = stripped.replace(part, " ")
            else:
                stripped = re.sub(
                    rf"(?<![\w-]){re.escape(part)}(?:['’]s)?(?![\w-])", " ", stripped, flags=re.I
                )
    stripped = " ".join(stripped.split())
    return stripped if stripped.strip(" ?!.,") else query


_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


# ----- list questions and turns that only ask -----


@dataclass(frozen=True)
class HopTuning:
    """Knobs of the multi-hop steps below (kept apart from ``RecallTuning``, whose module other
    changes own; chosen leave-one-conversation-out like its knobs, ``bench/locomo/loo.py``)."""

    # Relevance multiplier for a memory that mostly asks (``question_share`` above
    # ``question_min_share``): "What type of guitar? Been playing long?" shares the words of a
    # question about guitars and answers nothing. 1 turns it off. Not applied when the query is
    # itself about what was asked (``asks_about_asking``). Chosen 0.6 on every LoCoMo fold.
    question_factor: float = 0.6
    question_min_share: float = 0.6
    # A list question (``asks_for_list``): among its best ``spread_window`` answers, each place
    # costs this much × how many answers from the same session are already placed, so the list
    # is not spent on one conversation while the next item waits in another. 0 turns it off;
    # chosen 0.01 on every LoCoMo fold (0.02 no better; final scores are spaced ~0.01 apart).
    list_session_penalty: float = 0.01
    spread_window: int = 30
    # A list question about one speaker (the speaker focus): what the others said counts this
    # much more (on top of the focus factor). Every item of "What are Joanna's hobbies?" is
    # Joanna's; the other speaker's own hobbies match its words as well. 1 turns it off.
    # Chosen 0.3 on every LoCoMo fold with memories read in context (off, 1, without it).
    list_focus_factor: float = 0.3
    # A memory read in its conversation (``conversation``): its dense evidence is the better
    # of its own cosine and this share × the cosine of its vector plus ``context_before`` ×
    # the previous turn's and ``context_after`` × the next one's (the other speaker's turns of
    # the same sitting). "Mostly sourdough, and a rye on Sundays." answers "What does she
    # bake?" only next to the question it replies to. 0 turns it off.
    # Chosen on every LoCoMo fold (1 on four, 0.95 on one).
    context_share: float = 1.0
    context_before: float = 0.5
    context_after: float = 0.3

    @property
    def context(self) -> ContextReading | None:
        """How the main search reads memories in context (None: by their own vectors)."""
        if self.context_share <= 0.0:
            return None
        return ContextReading(self.context_share, self.context_before, self.context_after)


DEFAULT_HOPS = HopTuning()

_IMAGE_NOTE = re.compile(r"\[(?:image|photo|picture)[^\]]*\]", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?。！？]+[.!?。！？]*")
_QUESTION_END = ("?", "？")


@functools.lru_cache(maxsize=65_536)
def question_share(text: str) -> float:
    """The share of a text's words (CJK: characters) in sentences that end with a question mark.

    "Wow, that looks great! Where in England was it?" is 5/9; a statement is 0. Attached image
    notes ("[image: a photo of ...]") are not the speaker's words and are left out.
    """
    plain = _IMAGE_NOTE.sub(" ", text)
    total = asked = 0
    for sentence in _SENTENCE.findall(plain):
        sentence = sentence.strip()
        if not sentence:
            continue
        size = len(_CJK.findall(sentence)) + len(_NON_CJK_WORD.findall(sentence))
        total += size
        if sentence.endswith(_QUESTION_END):
            asked += size
    return asked / total if total else 0.0


_NON_CJK_WORD = re.compile(r"[^\s\u3400-\u4dbf\u4e00-\u9fff.!?。！？,，]+")
_ASKING = re.compile(r"\b(?:ask|asks|asked|asking|question|questions)\b|问", re.IGNORECASE)


def asks_about_asking(query: str) -> bool:
    """True for "What did Maria ask John?" / "她问了什么": there the questions are the answers."""
    return _ASKING.search(query) is not None


# "What activities ...", "Which European countries ...", "What kind of interests ...": a
# question word, at most two modifiers, then a plural noun. Words ending in "s" that are no
# plural nouns end the match without making it a list.
_PLURAL_ASKED = re.compile(
    r"^\s*(?:what|which)\s+(?:(?:kinds?|types?|sorts?)\s+of\s+)?(?:[\w+/'’-]+\s+){0,2}?"
    r"(?P<noun>[a-z]+s)\b",
    re.IGNORECASE,
)
_NOT_PLURAL = frozenset(
    {
        "is", "was", "has", "does", "this", "his", "its", "as", "us", "yes", "always",
        "perhaps", "whose", "plus", "thus", "less", "unless", "across", "towards", "afterwards",
    }
)  # fmt: skip
_LIST_CUES = re.compile(
    r"^\s*(?:what|which)\s+(?:are|were)\b|\b(?:in what ways|what ways|what are some|what things)\b"
    r"|^\s*how many\b|哪些|都有什么|有什么.{0,6}(?:爱好|活动|东西)|几次|多少次",
    re.IGNORECASE,
)


def asks_for_list(query: str) -> bool:
    """True when the question's shape asks for several things (rules, EN and ZH).

    "What activities does Melanie partake in?", "What are Joanna's hobbies?", "In what ways
    ...", "她去过哪些国家？"; a count too ("How many tournaments has Nate won?", "去了几次"),
    which needs every instance. Read from the question's form only, never its topic.
    """
    match = _PLURAL_ASKED.match(query)
    if match is not None and match.group("noun").lower() not in _NOT_PLURAL:
        return True
    return _LIST_CUES.search(query) is not None


def spread_over_sessions(
    scores: Sequence[float], sessions: Sequence[str], penalty: float
) -> tuple[list[int], list[float]]:
    """Greedy order of candidates given best first: each next place goes to the highest
    ``score − penalty × (answers from its session already placed)``; ties keep the given order.

    Returns the order (indices into ``scores``) and each placed candidate's adjusted score, made
    non-increasing (a running minimum) so gap truncation still reads a descending list.
    ``penalty`` 0 keeps the order and the scores.
    """
    count = len(scores)
    if penalty <= 0.0 or count <= 1:
        return list(range(count)), [float(s) for s in scores]
    placed: dict[str, int] = {}
    left = list(range(count))
    order: list[int] = []
    adjusted: list[float] = []
    for _ in range(count):
        pick = max(left, key=lambda i: (scores[i] - penalty * placed.get(sessions[i], 0), -i))
        value = float(scores[pick]) - penalty * placed.get(sessions[pick], 0)
        adjusted.append(min(value, adjusted[-1]) if adjusted else value)
        order.append(pick)
        left.remove(pick)
        placed[sessions[pick]] = placed.get(sessions[pick], 0) + 1
    return order, adjusted
