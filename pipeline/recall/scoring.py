"""Scores and visibility, as pure functions of a record and the query time ``at``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, TypeVar

import numpy as np
import numpy.typing as npt

from pipeline.memory.rules import decay
from pipeline.memory.rules.attribute_chance import one_attribute
from pipeline.memory.rules.decay import SECONDS_PER_DAY
from pipeline.recall.ann import AnnParams
from pipeline.recall.fusion import DEFAULT_PATH_WEIGHTS
from pipeline.runtime.settings import RecallPolicy
from schemas.memory import MemoryRecord, Slot, Status

# Scores are computed per candidate in tests and for a whole candidate array in the engine.
Num = TypeVar("Num", float, npt.NDArray[np.float64])


@dataclass(frozen=True)
class RecallTuning:
    """Knobs of this package beyond ``RecallPolicy`` (seed numbers live there)."""

    path_weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_PATH_WEIGHTS))
    # How much a lexical/entity match counts as similarity, relative to a cosine of 1.
    bm25_evidence: float = 0.85
    entity_evidence: float = 0.95
    # Share of relevance that comes from agreement between paths (normalised RRF).
    consensus_share: float = 0.2
    # Relevance multiplier for memories outside a time window the query names: "what did I say
    # last week" is answered wrongly by anything else, however similar.
    outside_window_factor: float = 0.5
    # A window also matches memories whose own words name a time inside it ("last night", said
    # the day after), not only those created inside it (``temporal.time_references``).
    window_references: bool = True
    # A named window no visible memory falls in is ignored (its words become keywords again)
    # instead of demoting every candidate alike.
    ignore_empty_window: bool = True
    # Relevance added, for a question asking "when", to memories whose words name a time.
    when_time_bonus: float = 0.1
    # Relevance multiplier for what other speakers said when the query names exactly one of the
    # namespace's speakers ("What does Caroline like?"): first-hand statements answer it.
    speaker_focus_factor: float = 0.7
    # Current-value queries ("now", "still", 现在): memories within this much of the best
    # relevance are ordered newest first (``newest_first``); None turns the rule off.
    current_value_margin: float | None = 0.15
    # ... and the older members of that group are left out of the answer (``older_answers``).
    current_value_drops_older: bool = True
    # ... and so is an answer whose speaker later gave another value of the same single-valued
    # attribute (``replaced_answers``: the attribute model's guesses recorded in the slots, both
    # at least this sure, or their distributions' chance at least its square; lower than the
    # update rule's, since nothing is superseded); None: off.
    current_value_attribute_floor: float | None = 0.3
    # Comparable answers (``freshest_of_comparable``): answers within this much of the best
    # relevance whose vectors are at least ``comparable_cosine`` alike to the best one's (two
    # outings, two calls) take the places they hold in the seed formula's order, so the fresher
    # goes first when the question does not say which; 0 turns the rule off.
    comparable_margin: float = 0.1
    comparable_cosine: float = 0.5
    # One hop across sessions (``links``): memories sharing a specific entity (specificity at
    # least ``link_min_specificity``) or nearly the same words (cosine at least
    # ``link_min_cosine``) with one of the ``link_seeds`` best first-pass answers inherit
    # ``link_share`` × link strength × that answer's relevance; 0 turns the path off.
    link_share: float = 0.5
    link_seeds: int = 5
    link_per_seed: int = 5
    link_min_specificity: float = 0.5
    link_min_cosine: float = 0.6
    # A question joining two facts (``decompose``): its parts are recalled too and a memory's
    # relevance is at least this share of how well it answers one part; 0 turns it off.
    decompose_share: float = 0.0
    # Relevance feedback (``hops.feedback_vector``): the query moved towards its
    # ``feedback_seeds`` best answers so far (``feedback_weight`` × their mean) is searched
    # again, and a memory's relevance is at least ``feedback_share`` × its cosine with that
    # vector; 0 turns the path off.
    feedback_share: float = 0.0
    feedback_seeds: int = 3
    feedback_weight: float = 1.0
    # Maximal marginal relevance over the best ``diversity_window`` answers
    # (``hops.diversified``): each place costs this much × the cosine with the nearest answer
    # already placed; 0 keeps the score order.
    diversity_penalty: float = 0.0
    diversity_window: int = 30
    # Speaker names in the query (``hops.without_names``): "keep" them as words; "lexical"
    # drops them from the keywords; "both" from the keywords and the query vector too.
    speaker_names: Literal["keep", "lexical", "both"] = "both"
    # Relevance multiplier for non-procedural memories when a query is confidently routed to
    # procedural memory ("how did we fix …", "怎么解决").
    procedural_route_factor: float = 0.85
    # Weight of freshness when the query does not ask for recent things (``seeks_recency``);
    # the rest of the policy's freshness weight goes to similarity. Recency is then a
    # tie-breaker between about equally relevant memories, not a reason to rank a weaker match
    # of last week above the memory that answers a question about last spring (LoCoMo
    # recall_all@10: 0.579 with the seed weight for every query, 0.637 with this).
    tiebreak_freshness_weight: float = 0.03
    # Share of a keyword hit's coverage the reply right after it inherits (``neighbours``):
    # second-hand, so discounted like ``bm25_evidence`` (LoCoMo is flat from 0.7 to 1.0).
    follow_up_share: float = 0.85
    # Below this routing confidence the dense path searches every region at once.
    min_route_confidence: float = 0.3
    # Namespaces with at least this many rows get an HNSW graph for the dense path and a
    # decay-ordered list for the activation path (None: always scan exactly). Smaller ones are
    # scanned exactly: cheap there, and exact. A namespace that shrinks below half of it goes
    # back to exact scans (the hysteresis avoids rebuilding around the threshold).
    ann_min_rows: int | None = 20_000
    ann: AnnParams = field(default_factory=AnnParams)


DEFAULT_TUNING = RecallTuning()


def freshness_days(days: Num, lambda_per_day: float) -> Num:
    """``freshness`` over an array of ages in days (the engine scores candidates at once)."""
    return np.exp(-lambda_per_day * np.maximum(0.0, days))  # type: ignore[no-any-return]


def activation_at(record: MemoryRecord, at: datetime) -> float:
    """The record's activation decayed to ``at``: the one decay rule (``memory.rules.decay``)."""
    return decay.activation_at(record.activation, record.activation_at, record.base_importance, at)


def score_weights(
    policy: RecallPolicy, tuning: RecallTuning = DEFAULT_TUNING, *, wants_recent: bool = True
) -> tuple[float, float, float]:
    """(similarity, importance, freshness) weights for one query; they still sum as the seed's.

    A query that asks for recent things ("what's new", "lately", "最近") gets the seed formula.
    Any other query gets freshness only as a tie-breaker and its weight moves to similarity:
    that a memory is newer says nothing about whether it answers a question about the past, and
    contradictions are settled by supersession (the newer value hides the older), not by it.
    """
    if wants_recent:
        return policy.weight_similarity, policy.weight_importance, policy.weight_freshness
    fresh = min(policy.weight_freshness, tuning.tiebreak_freshness_weight)
    return (
        policy.weight_similarity + policy.weight_freshness - fresh,
        policy.weight_importance,
        fresh,
    )


def final_score(
    relevance: Num,
    importance: Num,
    fresh: Num,
    policy: RecallPolicy,
    tuning: RecallTuning = DEFAULT_TUNING,
    *,
    wants_recent: bool = True,
) -> Num:
    """Seed formula (weights from ``score_weights``); works on floats or numpy arrays alike."""
    similarity_w, importance_w, freshness_w = score_weights(
        policy, tuning, wants_recent=wants_recent
    )
    # Importance can reach 1.5 (confirmation factor); clip so every term stays in [0, 1].
    return (  # type: ignore[no-any-return]
        similarity_w * relevance
        + importance_w * np.clip(importance, 0.0, 1.0)
        + freshness_w * fresh
    )


def relevance(
    cosine: Num,
    bm25_coverage: Num,
    entity_score: Num,
    rrf_share: Num,
    tuning: RecallTuning = DEFAULT_TUNING,
) -> Num:
    """Similarity in [0, 1]: the combined evidence of the paths, plus path agreement.

    The dense cosine alone would bury an exact id that the embedding blurs; any one path that is
    sure (high cosine, the whole query matched lexically, a verbatim identifier) may carry it.
    Meaning (cosine) and wording (the share of the query's idf mass a memory covers) are
    different, largely independent clues, so they combine as a noisy OR, 1 − (1 − c)(1 − w·b):
    a memory with both a fair cosine and a fair lexical match beats one with only a slightly
    better single score (taking the max threw the weaker clue away; LoCoMo recall_all@10 with
    relevance alone 0.605 → 0.634). Either clue alone still counts in full. The entity path
    stays a max: its identifiers are usually in the lexical match already.
    """
    dense = np.clip(cosine, 0.0, 1.0)
    lexical = tuning.bm25_evidence * np.clip(bm25_coverage, 0.0, 1.0)
    evidence = np.maximum(
        1.0 - (1.0 - dense) * (1.0 - lexical),
        tuning.entity_evidence * np.clip(entity_score, 0.0, 1.0),
    )
    share = np.clip(rrf_share, 0.0, 1.0)
    return (1.0 - tuning.consensus_share) * evidence + tuning.consensus_share * share  # type: ignore[no-any-return]


def answer_group(
    relevance: npt.NDArray[np.float64],
    margin: float,
    cosine: npt.NDArray[np.float64] | None = None,
    created: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.bool_]:
    """The candidates that answer a current-value query about as well as its best answer.

    Within ``margin`` of the best relevance, or within ``margin`` of the best dense cosine and
    said at least ``REPLACEMENT_GAP_DAYS`` after every one of the former: the statement of a new
    value seldom repeats the question's words ("What race am I training for?" → "Signed up for a
    triathlon in Krakow"), so the lexical evidence that lifts the old statement ("Training for the
    Chicago marathon") says nothing about which answer holds now, while the meaning the two share
    with the question does. Meaning alone is weak evidence (a small encoder finds most short
    Chinese remarks alike), so it counts only for what came later than the best answers, as a
    replacement does, not for what was said beside them.
    """
    group = relevance >= float(relevance.max()) - margin
    if cosine is not None and cosine.size and created is not None:
        after = float(created[group].max()) + REPLACEMENT_GAP_DAYS * SECONDS_PER_DAY
        group |= (cosine >= float(cosine.max()) - margin) & (created >= after)
    return group


# A value that replaces another is said later, not in the same breath (days, in every
# replacement we have seen); remarks from the same sitting stand beside each other.
REPLACEMENT_GAP_DAYS = 1.0


def newest_first(
    relevance: npt.NDArray[np.float64],
    created: npt.NDArray[np.float64],
    scores: npt.NDArray[np.float64],
    margin: float,
    cosine: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """Scores for a current-value query: the newest of the about-equally good answers first.

    The candidates of ``answer_group`` answer the question about equally well ("I'm learning the
    guitar" / later "these days it's the piano"); among them the newest is the value that holds
    now. They take the group's best score, minus a hair per place in newest-first order, so they
    stay together at the top (gap truncation keeps them) and everything else keeps its own
    score. Supersession already hides a value a triplet contradicts; this orders the ones no
    rule could pair. ``created`` is epoch seconds; the as-of filter ran before, so "newest"
    means newest as of the query time.
    """
    if relevance.size == 0:
        return scores
    members = np.flatnonzero(answer_group(relevance, margin, cosine, created))
    # Newest sitting first; within one sitting the better score first (remarks said in the same
    # breath stand beside each other: the later one replaces nothing).
    order = members[np.lexsort((-scores[members], -sittings(created[members])))]
    top = float(scores[members].max())
    adjusted = scores.copy()
    adjusted[order] = top - _NEWEST_STEP * np.arange(order.size)
    return adjusted


def older_answers(
    relevance: npt.NDArray[np.float64],
    created: npt.NDArray[np.float64],
    margin: float,
    cosine: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.bool_]:
    """What held before the newest member of a current-value query's ``answer_group``: the
    members within ``margin`` of the best relevance said in an earlier sitting (``sittings``).

    "What do we use for CI these days?" asked after "our CI runs on Jenkins" and, later, "all our
    CI pipelines live in GitHub Actions": both answer it about equally well, the newer is the
    answer now, and the older offered beside it reads as still true. The engine leaves these out
    of a current-value answer unless history is asked for. A member that is only as close in
    meaning is ordered with the group but never left out: leaving out needs the stronger
    evidence of matching the question as well as the best answer. Members of the newest sitting
    are all current: what was said in the same breath replaced nothing.
    """
    older = np.zeros(relevance.size, dtype=np.bool_)
    if relevance.size == 0:
        return older
    members = np.flatnonzero(answer_group(relevance, margin, cosine, created))
    sitting = sittings(created[members])
    latest_start = float(created[members][sitting == sitting.max()].min())
    matches = relevance >= float(relevance.max()) - margin
    older[matches & (created < latest_start)] = True
    return older


def sittings(created: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Which sitting each moment belongs to, numbered from the earliest: moments less than
    ``REPLACEMENT_GAP_DAYS`` apart (chained) are one sitting, since a value that replaces
    another is said later, not in the same breath."""
    if created.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(created, kind="stable")
    gaps = np.diff(created[order]) >= REPLACEMENT_GAP_DAYS * SECONDS_PER_DAY
    number = np.empty(created.size, dtype=np.int64)
    number[order] = np.concatenate(([0], np.cumsum(gaps)))
    return number


@dataclass(frozen=True)
class SaidAttribute:
    """Who said a candidate, when, and which attribute the attribute model read it as giving."""

    speaker: str
    created: float  # epoch seconds
    slot: Slot | None  # the recorded slot: the model's argmax, and its distribution where kept


def speaker_of(record: MemoryRecord) -> str:
    """Who said the memory: the speaker of its first source turn ("" when unknown)."""
    return record.provenance[0].speaker if record.provenance else ""


def session_of(record: MemoryRecord) -> str:
    """The session the memory was said in: that of its first source turn ("" when unknown)."""
    return record.provenance[0].session_id if record.provenance else ""


def said_attribute(record: MemoryRecord) -> SaidAttribute:
    return SaidAttribute(
        speaker=speaker_of(record), created=record.created_at.timestamp(), slot=record.slot
    )


def _same_attribute_said(older: SaidAttribute, newer: SaidAttribute, floor: float) -> bool:
    """Both give a value of one single-valued attribute (``attribute_chance.one_attribute``) at
    the recall side's ``floor``: each argmax at least ``floor`` sure, or, where both slots keep
    the distributions, their chance at least ``floor`` squared (a product of two probabilities,
    as the two argmaxes' were)."""
    if older.slot is None or newer.slot is None:
        return False
    return one_attribute(older.slot, newer.slot, floor * floor, floor) is not None


def replaced_answers(said: Sequence[SaidAttribute], floor: float) -> npt.NDArray[np.bool_]:
    """For a current-value query: the candidates whose speaker gave another value of the same
    single-valued attribute among the candidates later (at least ``REPLACEMENT_GAP_DAYS``;
    "the same attribute" as :func:`_same_attribute_said` reads it from the recorded slots).

    "Training for the Chicago marathon" and, weeks later, "Signed up for a triathlon in Krakow"
    share no word; the update rule needs both read surely as the training goal before it
    supersedes (0.6), and here they are read so only at 0.34 and 0.83. A current-value question
    ("What race am I training for at the moment?") asks for the one that holds now, and leaving
    the older out of that answer changes no memory, so a lower ``floor`` is enough. A candidate
    is replaced only by one that is itself in the candidates: something the question found.
    """
    replaced = np.zeros(len(said), dtype=np.bool_)
    gap = REPLACEMENT_GAP_DAYS * SECONDS_PER_DAY
    for i, older in enumerate(said):
        replaced[i] = any(
            newer.speaker == older.speaker
            and newer.created >= older.created + gap
            and _same_attribute_said(older, newer, floor)
            for newer in said
        )
    return replaced


def comparable_answers(
    relevance: npt.NDArray[np.float64],
    alike_to_best: npt.NDArray[np.bool_],
    best: int,
    margin: float,
) -> npt.NDArray[np.bool_]:
    """The answers comparable with the best one: about as relevant and alike in meaning.

    ``alike_to_best`` says which candidates are the same kind of remark as the best answer
    (their vectors close to its vector); the best answer is always a member.
    """
    group = alike_to_best & (relevance >= float(relevance[best]) - margin)
    group[best] = True
    return group


def freshest_of_comparable(
    scores: npt.NDArray[np.float64],
    seed_scores: npt.NDArray[np.float64],
    group: npt.NDArray[np.bool_],
) -> npt.NDArray[np.float64]:
    """Scores where the members of ``group`` hold the group's places in ``seed_scores`` order.

    Between two comparable one-off remarks ("Called grandma, she's been out in the allotment"
    and, weeks later, "Called grandma, she told me about her watercolour class"), a question
    that does not say which ("What did grandma tell me about?") is answered by the fresher: the
    seed formula, freshness weight in full, orders the group. Across the rest of the candidates
    freshness stays a tie-breaker (``score_weights``), so a question about last spring is not
    answered by last week's weaker match. The group's places and scores stay the same ones,
    only who holds them changes: nothing outside the group moves, nothing leaves the head, and
    gap truncation sees the same scores (on LoCoMo, letting the group's seed scores move against
    the others lost 9 questions; reordering within the places lost 1).
    """
    members = np.flatnonzero(group)
    if members.size < 2:
        return scores
    places = np.sort(scores[members])[::-1]
    holders = members[np.argsort(-seed_scores[members], kind="stable")]
    reordered = scores.copy()
    reordered[holders] = places
    return reordered


# Score steps between members of a newest-first group: far below any real score difference.
_NEWEST_STEP = 1e-6


def truncate_by_gaps(scores: Sequence[float], policy: RecallPolicy) -> int:
    """How many of the descending ``scores`` to keep.

    Seed rule on the top gap: s1 − s2 > gap_one → 1; ≥ gap_two → 2; else up to max_results. In
    the last case we also stop at the first later cliff (> gap_one), so a clear tail is not kept
    just because the head was close.
    """
    if not scores:
        return 0
    if len(scores) == 1:
        return 1
    top_gap = scores[0] - scores[1]
    if top_gap > policy.gap_one:
        return 1
    if top_gap >= policy.gap_two:
        return min(2, len(scores))
    keep = min(policy.max_results, len(scores))
    for position in range(1, keep):
        if scores[position - 1] - scores[position] > policy.gap_one:
            return position
    return keep


_STATUS_CHANGES: dict[str, Status | None] = {
    "created": "active",
    "superseded": "superseded",
    "forgotten": "forgotten",
    "cooled": "cold",
    "reactivated": "active",
    "erased": None,
}


def status_at(record: MemoryRecord, at: datetime) -> Status | None:
    """The record's status as of ``at``, or None when it is not visible then.

    Not visible: created after ``at``, or erased by then. Otherwise replay the status-changing
    history entries up to ``at``. A record whose history has no status entries at all (an older
    writer) is taken to have its current status since ``updated_at``.
    """
    if record.created_at > at:
        return None
    changes = [entry for entry in record.history if entry.change in _STATUS_CHANGES]
    if not changes:
        if record.status != "active" and record.updated_at > at:
            return "active"
        return record.status
    status: Status | None = "active"
    for entry in sorted(changes, key=lambda entry: entry.at):
        if entry.at > at:
            break
        status = _STATUS_CHANGES[entry.change]
    return status


def hidden_since(record: MemoryRecord) -> datetime | None:
    """When the record last became superseded/forgotten, if it is so now (for vector prefilters)."""
    if record.status not in ("superseded", "forgotten"):
        return None
    for entry in reversed(sorted(record.history, key=lambda entry: entry.at)):
        if entry.change in ("superseded", "forgotten"):
            return entry.at
    return record.updated_at


def supersede_chain(
    record: MemoryRecord, lookup: Callable[[str], MemoryRecord | None], limit: int = 32
) -> list[str]:
    """Ids of the records that replaced ``record``, oldest replacement first."""
    chain: list[str] = []
    seen = {record.id}
    current: MemoryRecord | None = record
    while current is not None and len(chain) < limit:
        successor = current.superseded_by or next(
            (a.memory_id for a in current.associations if a.relation == "superseded_by"), None
        )
        if successor is None or successor in seen:
            break
        chain.append(successor)
        seen.add(successor)
        current = lookup(successor)
    return chain
