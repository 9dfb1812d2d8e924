"""Recall: route → candidates per path → fuse → score → fall back → as-of filter → cut → format.

Every decision takes the query time from ``at`` (I2); the only model call is one query
embedding, made before the index lock is taken.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from pipeline.memory.rules.decay import SECONDS_PER_DAY
from pipeline.models.encoders import Encoder, known_share
from pipeline.recall.context import Language, format_context, format_line
from pipeline.recall.conversation import ContextReading
from pipeline.recall.decompose import decompose
from pipeline.recall.fusion import RRF_K, Fused, max_rrf, rrf_fuse
from pipeline.recall.hops import (
    DEFAULT_HOPS,
    HopTuning,
    asks_about_asking,
    asks_for_list,
    diversified,
    feedback_vector,
    person_names,
    question_share,
    spread_over_sessions,
    without_names,
)
from pipeline.recall.hot_index import (
    REGION_CODE,
    HotIndex,
    NamespaceSearch,
    NamespaceView,
    RowFilter,
)
from pipeline.recall.lexical import search_terms
from pipeline.recall.links import linked
from pipeline.recall.neighbours import follow_ups
from pipeline.recall.routing import (
    RouteDecision,
    asks_current_value,
    asks_how_it_went,
    asks_latest,
    asks_when,
    classify,
    seeks_recency,
    speakers_named,
    without_time_cues,
)
from pipeline.recall.scoring import (
    DEFAULT_TUNING,
    RecallTuning,
    comparable_answers,
    final_score,
    freshest_of_comparable,
    freshness_days,
    newest_first,
    older_answers,
    relevance,
    replaced_answers,
    said_attribute,
    session_of,
    speaker_of,
    status_at,
    supersede_chain,
    truncate_by_gaps,
)
from pipeline.recall.temporal import NaiveTime, TimeWindow, parse_time_window
from pipeline.recall.types import PathEvidence, RecalledMemory, RecallTrace
from pipeline.runtime.settings import RecallPolicy
from schemas.memory import REGIONS, Region, Status

_HIDDEN: frozenset[Status] = frozenset({"superseded", "forgotten"})


@dataclass(frozen=True)
class _Part:
    """One part question of a question that joins two facts (``decompose``)."""

    text: str
    vector: np.ndarray
    tokens: list[str]
    reading: float  # how much of it the encoder reads (``known_share``)


@dataclass(frozen=True)
class _PartSearch:
    """A part question's reader, its fused candidates, its keyword coverage and its speaker."""

    search: NamespaceSearch
    ranked: list[tuple[str, float]]
    coverage: dict[str, float]
    focus: str | None
    reading: float


@dataclass
class _Candidate:
    fused: Fused
    relevance: float
    freshness: float
    score: float
    status: Status
    via_fallback: bool


class RecallEngine:
    def __init__(
        self,
        index: HotIndex,
        encoder: Encoder,
        policy: RecallPolicy | None = None,
        tuning: RecallTuning = DEFAULT_TUNING,
        *,
        exact: bool = False,
        hops: HopTuning = DEFAULT_HOPS,
    ) -> None:
        self.index = index
        self.encoder = encoder
        self.policy = policy or RecallPolicy()
        self.tuning = tuning
        self.hops = hops
        # True: scan every namespace exactly, even one with a graph (benchmarks, recall checks).
        self.exact = exact

    def recall(
        self,
        namespace: str,
        query: str,
        *,
        at: datetime,
        limit: int | None = None,
        regions: Sequence[Region] | None = None,
        include_history: bool = False,
        truncate: bool = True,
        budget_chars: int | None = None,
    ) -> list[RecalledMemory]:
        memories, _ = self.recall_with_trace(
            namespace,
            query,
            at=at,
            limit=limit,
            regions=regions,
            include_history=include_history,
            truncate=truncate,
            budget_chars=budget_chars,
        )
        return memories

    def format_context(
        self,
        namespace: str,
        query: str,
        *,
        at: datetime,
        limit: int | None = None,
        regions: Sequence[Region] | None = None,
        include_history: bool = False,
        budget_chars: int | None = None,
        budget_tokens: int | None = None,
        language: Language | None = None,
    ) -> str:
        memories = self.recall(
            namespace,
            query,
            at=at,
            limit=limit,
            regions=regions,
            include_history=include_history,
        )
        return format_context(
            memories,
            max_chars=budget_chars or self.policy.context_chars,
            memory_chars=self.policy.memory_chars,
            max_tokens=budget_tokens,
            language=language,
        )

    def recall_with_trace(
        self,
        namespace: str,
        query: str,
        *,
        at: datetime,
        limit: int | None = None,
        regions: Sequence[Region] | None = None,
        include_history: bool = False,
        truncate: bool = True,
        budget_chars: int | None = None,
    ) -> tuple[list[RecalledMemory], RecallTrace]:
        if at.tzinfo is None:
            raise NaiveTime("at: a timezone-aware datetime is required")
        decision = classify(query)
        window = parse_time_window(query, at)
        texts = decompose(query) if self.tuning.decompose_share > 0.0 else []
        names = self._speakers_named(namespace, query)
        plain = without_names(query, names) if names else query
        searched = [query, *texts]
        if self.tuning.speaker_names == "both":
            # Each part names its speaker as the question does; the focus reads the original.
            searched = [without_names(text, names) for text in searched]
        # The one model call (the question and its parts, if any), outside the lock so index
        # updates are not held up by it.
        vectors = np.asarray(self.encoder.encode(searched), dtype=np.float32)
        query_vector = vectors[0]
        # A cosine is worth what the encoder read of the question: MiniLM reads most Chinese
        # characters as one unknown piece, and its cosines between Chinese texts that share
        # nothing run 0.6-0.9, enough to put an unrelated remark first. The dense evidence
        # counts in proportion to the share of the question's word pieces the encoder knows
        # (1.0 for an English question, 0.2 for 我爸现在在哪个医院？): the words decide where
        # it reads little.
        reading = known_share(self.encoder, searched[0])
        parts = [
            _Part(
                text,
                vectors[i + 1],
                search_terms(without_names(text, names) if names else text),
                known_share(self.encoder, searched[i + 1]),
            )
            for i, text in enumerate(texts)
        ]
        # The time phrase found its own path; as keywords "last week" would match any "week".
        lexical = without_time_cues(plain if self.tuning.speaker_names != "keep" else query)
        tokens = search_terms(lexical.replace(window.label, " ") if window else lexical)

        explicit = list(dict.fromkeys(regions)) if regions else None
        if explicit is not None:
            primary, may_fall_back = explicit, False
        elif decision.confidence >= self.tuning.min_route_confidence:
            primary, may_fall_back = [decision.route], True
        else:
            # No confident route: one pass over everything beats a wrong first guess.
            primary, may_fall_back = list(REGIONS), False

        with self.index.lock:
            view = self.index.view(namespace)
            if view is None or view.size == 0:
                return [], self._trace(decision, primary, False, window, 0)
            if (
                window is not None
                and self.tuning.ignore_empty_window
                and not self._window_has_memories(view, window, at)
            ):
                # A window no memory falls in filters nothing: read the query as if it named
                # none, its time words back among the keywords ("last weekend" -> "weekend").
                window = None
                tokens = search_terms(lexical)
            candidates, fallback_used = self._candidates(
                view,
                query,
                tokens,
                query_vector,
                at,
                window,
                primary,
                explicit,
                may_fall_back,
                include_history,
                parts,
                reading,
                how_it_went=asks_how_it_went(query, decision),
            )
            candidates.sort(key=lambda c: (-c.score, c.fused.memory_id))
            if self.tuning.diversity_penalty > 0.0:
                candidates = self._diversified(view, candidates)
            if self.hops.list_session_penalty > 0.0 and asks_for_list(query):
                candidates = self._spread_over_sessions(view, candidates)
            count = len(candidates)
            if truncate:
                count = truncate_by_gaps([c.score for c in candidates], self.policy)
                if limit is not None:
                    count = min(count, limit)
            else:
                count = min(count, limit if limit is not None else self.policy.max_results)
            memories = [
                self._recalled(view, candidate, include_history) for candidate in candidates[:count]
            ]
        if budget_chars is not None:
            memories = self._fit(memories, budget_chars)
        return memories, self._trace(decision, primary, fallback_used, window, len(candidates))

    # ----- steps -----

    def _speakers_named(self, namespace: str, query: str) -> list[str]:
        """The namespace's speakers the query names, when the tuning reads the query without
        them (``hops.without_names``); otherwise none."""
        if self.tuning.speaker_names == "keep":
            return []
        with self.index.lock:
            view = self.index.view(namespace)
            speakers = list(view.speakers) if view is not None else []
        return person_names(speakers_named(query, speakers))

    @staticmethod
    def _window_has_memories(view: NamespaceView, window: TimeWindow, at: datetime) -> bool:
        """True when some memory visible at ``at`` was created inside the window.

        Memories that only name a time inside it join a window that has its own memories; they
        do not make an empty one count (a question's "yesterday" is often not the day a memory
        happened to mention).
        """
        moment = at.timestamp()
        return any(
            view.created[view.slot_of[memory_id]] <= moment
            for memory_id in view.ids_in_window(window)
        )

    def _part_searches(
        self,
        view: NamespaceView,
        parts: Sequence[_Part],
        search: NamespaceSearch,
        at: datetime,
        include_history: bool,
        explicit: list[Region] | None,
    ) -> list[_PartSearch]:
        """Each part question's own dense (every region) and BM25 candidates, fused."""
        k = self.policy.candidates_per_path
        found: list[_PartSearch] = []
        for part in parts:
            part_search = self._search(view, part.vector, at, include_history, explicit)
            bm25 = view.bm25.search(part.tokens, k, search.visible)
            dense = [
                (view.ids[slot], score) for slot, score in part_search.dense(k, part_search.base)
            ]
            fused = rrf_fuse(
                {"dense": dense, "bm25": [(hit.memory_id, hit.score) for hit in bm25]},
                self.tuning.path_weights,
                RRF_K,
            )
            named = (
                speakers_named(part.text, view.speakers)
                if self.tuning.speaker_focus_factor < 1
                else []
            )
            found.append(
                _PartSearch(
                    part_search,
                    [(item.memory_id, item.rrf) for item in fused],
                    {hit.memory_id: hit.coverage for hit in bm25},
                    named[0] if len(named) == 1 else None,
                    part.reading,
                )
            )
        return found

    def _candidates(
        self,
        view: NamespaceView,
        query: str,
        tokens: list[str],
        query_vector: np.ndarray,
        at: datetime,
        window: TimeWindow | None,
        primary: list[Region],
        explicit: list[Region] | None,
        may_fall_back: bool,
        include_history: bool,
        parts: Sequence[_Part] = (),
        reading: float = 1.0,
        how_it_went: bool = False,
    ) -> tuple[list[_Candidate], bool]:
        k = self.policy.candidates_per_path
        # Regions the caller names are a hard filter on every path (folded into the base filter).
        search = self._search(
            view, query_vector, at, include_history, explicit, context=self.hops.context
        )
        routed = search.filter(primary)

        def listed(where: RowFilter) -> list[tuple[str, float]]:
            return [(view.ids[s], score) for s, score in search.dense(k, where)]

        def most_active(where: RowFilter) -> list[tuple[str, float]]:
            return [(view.ids[s], float(np.exp(value))) for s, value in search.active(k, where)]

        # Lexical and entity paths are not routed: an exact match is evidence in any region.
        bm25_hits = view.bm25.search(tokens, k, search.visible)
        entity_hits = view.entities.search(query, k, search.visible)
        ranked: dict[str, list[tuple[str, float]]] = {
            "dense": listed(routed),
            "bm25": [(hit.memory_id, hit.score) for hit in bm25_hits],
            "entity": [(hit.memory_id, hit.score) for hit in entity_hits],
            "activation": most_active(routed),
        }
        # The memory right after a keyword hit (its reply) inherits part of the hit's match.
        # "How did we fix …", 上次咋解决的: the speaker's own next statement may be the fix of the
        # problem a hit tells.
        follow = follow_ups(
            view,
            bm25_hits,
            search.visible,
            self.tuning.follow_up_share,
            own_continuation=how_it_went,
        )
        if follow:
            ranked["follow_up"] = follow
        if window is not None:
            # Inside the window, the most similar first.
            ranked["temporal"] = listed(search.filter(window=window))
        coverage = {hit.memory_id: hit.coverage for hit in bm25_hits}
        for memory_id, inherited in follow:
            coverage[memory_id] = max(coverage.get(memory_id, 0.0), inherited)
        # Full freshness weight only for a query after recent things; a named window decides alone.
        recent = window is None and seeks_recency(query)
        # "Where do I live now?": the newest of the equally good answers first; a named window
        # ("now" inside "in May 2023"?) decides alone.
        current_margin = self.tuning.current_value_margin
        current = window is None and current_margin is not None and asks_current_value(query)
        # "The last book I read", 上次: newest first too, but the earlier ones are not outdated.
        latest = window is None and current_margin is not None and asks_latest(query)
        when_bonus = self.tuning.when_time_bonus if asks_when(query) else 0.0
        named = speakers_named(query, view.speakers) if self.tuning.speaker_focus_factor < 1 else []
        focus = named[0] if len(named) == 1 else None
        # Memories that only ask step back, unless the query is about what was asked (``hops``).
        asking_factor = 1.0 if asks_about_asking(query) else self.hops.question_factor
        # A list question about one speaker: every item is theirs (``hops.list_focus_factor``).
        list_focus = self.hops.list_focus_factor if asks_for_list(query) else 1.0
        entity_score = {hit.memory_id: hit.score for hit in entity_hits}
        # Relevance a memory inherits from another path's evidence (links across sessions).
        linked_relevance: dict[str, float] = {}
        # The query moved towards its best answers (``hops.feedback_vector``), once searched.
        feedback: list[NamespaceSearch] = []
        # A question joining two facts: each part recalled on its own, as a path of its own.
        part_searches = self._part_searches(view, parts, search, at, include_history, explicit)
        if part_searches:
            ranked["decomposed"] = _interleave([p.ranked for p in part_searches], k)

        def score_all(first_pass: set[str] | None) -> list[_Candidate]:
            fused = rrf_fuse(ranked, self.tuning.path_weights, RRF_K)
            # Exact as-of status first: the vector prefilter is only a cheap superset.
            kept: list[tuple[Fused, Status]] = []
            for item in fused:
                status = status_at(view.records[item.memory_id], at)
                # Forgotten is never recalled, history or not (audit goes through inspect);
                # include_history brings back superseded facts and their supersede chain.
                if status is None or status == "forgotten":
                    continue
                if include_history or status not in _HIDDEN:
                    kept.append((item, status))
            if not kept:
                return []
            ceiling = (
                max_rrf(
                    [path for path, hits in ranked.items() if hits], self.tuning.path_weights, RRF_K
                )
                or 1.0
            )
            # The formula runs once over the candidate arrays, not once per candidate.
            slots = np.fromiter(
                (view.slot_of[item.memory_id] for item, _ in kept), dtype=np.int64, count=len(kept)
            )
            created = view.created[slots]
            inside_window = np.zeros(len(kept), dtype=np.bool_)
            if window is not None:
                inside_window = (created >= window.start.timestamp()) & (
                    created < window.end.timestamp()
                )
                if self.tuning.window_references:
                    # "What did she watch on 1 May?" is answered by "watched it last night",
                    # said on 2 May: the memory's own date counts as much as its created time.
                    referencing = view.referencing(window)
                    inside_window |= np.fromiter(
                        (item.memory_id in referencing for item, _ in kept), np.bool_, len(kept)
                    )
                # A named window ("last week", "上周", "in May 2023") is a filter when anything
                # falls inside it; only when nothing does are the nearest others shown, demoted.
                if inside_window.any():
                    flags = inside_window.tolist()
                    kept = [pair for pair, ok in zip(kept, flags, strict=True) if ok]
                    slots = slots[inside_window]
                    created = created[inside_window]
                    inside_window = inside_window[inside_window]
            speakers = [speaker_of(view.records[item.memory_id]) for item, _ in kept]

            def said_by(speaker: str) -> np.ndarray:
                return np.array([who == speaker for who in speakers], dtype=np.bool_)

            cosines = reading * search.cosines(slots)
            rel = relevance(
                cosines,
                np.array([coverage.get(item.memory_id, 0.0) for item, _ in kept]),
                np.array([entity_score.get(item.memory_id, 0.0) for item, _ in kept]),
                np.array([item.rrf for item, _ in kept]) / ceiling,
                self.tuning,
            )
            for moved in feedback:
                # Like the best answers and the question: an answer the question's words miss.
                rel = np.maximum(
                    rel, self.tuning.feedback_share * np.clip(moved.cosines(slots), 0.0, 1.0)
                )
            if focus is not None:
                # A question about one speaker is answered by what that speaker said.
                rel = np.where(said_by(focus), rel, rel * self.tuning.speaker_focus_factor)
                if list_focus < 1.0:
                    rel = np.where(said_by(focus), rel, rel * list_focus)
            if asking_factor < 1.0:
                asks = np.fromiter(
                    (
                        question_share(view.records[item.memory_id].content)
                        > self.hops.question_min_share
                        for item, _ in kept
                    ),
                    np.bool_,
                    len(kept),
                )
                rel = np.where(asks, rel * asking_factor, rel)
            if part_searches:
                # How well a memory answers one part of the question, discounted as second-hand.
                answers_a_part = np.zeros(len(kept))
                for part in part_searches:
                    answers = relevance(
                        part.reading * part.search.cosines(slots),
                        np.array([part.coverage.get(item.memory_id, 0.0) for item, _ in kept]),
                        np.zeros(len(kept)),
                        np.array([item.rrf for item, _ in kept]) / ceiling,
                        self.tuning,
                    )
                    if part.focus is not None:
                        # "What have Caroline and Melanie both painted?": each part is about one
                        # of them, as a question naming one speaker is.
                        answers = np.where(
                            said_by(part.focus), answers, answers * self.tuning.speaker_focus_factor
                        )
                    answers_a_part = np.maximum(answers_a_part, answers)
                rel = np.maximum(rel, self.tuning.decompose_share * answers_a_part)
            if linked_relevance:
                lifted = np.fromiter(
                    (linked_relevance.get(item.memory_id, 0.0) for item, _ in kept),
                    np.float64,
                    len(kept),
                )
                rel = np.maximum(rel, lifted)
            if explicit is None and primary == ["procedural"]:
                # "How did we fix it?" asks for the fix, not for restatements of the problem,
                # which share every keyword with the question: other regions step back a little.
                in_route = view.region[slots] == REGION_CODE["procedural"]
                rel = np.where(in_route, rel, rel * self.tuning.procedural_route_factor)
            if window is not None:
                rel = np.where(inside_window, rel, rel * self.tuning.outside_window_factor)
            if when_bonus > 0.0:
                dated = np.fromiter(
                    (view.names_a_time(item.memory_id) for item, _ in kept), np.bool_, len(kept)
                )
                rel = np.minimum(1.0, rel + when_bonus * dated)
            fresh = freshness_days(
                (at.timestamp() - created) / SECONDS_PER_DAY, self.policy.freshness_lambda_per_day
            )
            scores = final_score(
                rel, view.importance[slots], fresh, self.policy, self.tuning, wants_recent=recent
            )
            if not (recent or current or latest) and self.tuning.comparable_margin > 0.0:
                scores = self._freshest_of_comparable(view, slots, rel, fresh, scores)
            if (current or latest) and current_margin is not None:
                scores = newest_first(rel, created, scores, current_margin, cosines)
                if current and not include_history and self.tuning.current_value_drops_older:
                    # The value that held before the newest answer is not offered as current.
                    now = ~older_answers(rel, created, current_margin, cosines)
                    floor = self.tuning.current_value_attribute_floor
                    if floor is not None:
                        said = [said_attribute(view.records[item.memory_id]) for item, _ in kept]
                        now &= ~replaced_answers(said, floor)
                    kept = [pair for pair, ok in zip(kept, now.tolist(), strict=True) if ok]
                    rel, fresh, scores = rel[now], fresh[now], scores[now]
            return [
                _Candidate(
                    item,
                    rel_n,
                    fresh_n,
                    score_n,
                    status,
                    first_pass is not None and item.memory_id not in first_pass,
                )
                for (item, status), rel_n, fresh_n, score_n in zip(
                    kept, rel.tolist(), fresh.tolist(), scores.tolist(), strict=True
                )
            ]

        candidates = score_all(None)
        share = self.tuning.link_share
        if share > 0.0 and candidates:
            # One hop across sessions from the best answers so far (``links``).
            best_first = sorted(candidates, key=lambda c: (-c.score, c.fused.memory_id))
            seeds = [(c.fused.memory_id, c.relevance) for c in best_first[: self.tuning.link_seeds]]
            hops = linked(
                view,
                seeds,
                search.visible,
                min_specificity=self.tuning.link_min_specificity,
                min_cosine=self.tuning.link_min_cosine,
                per_seed=self.tuning.link_per_seed,
                reading=reading,
            )
            if hops:
                ranked["linked"] = sorted(hops.items(), key=lambda item: (-item[1], item[0]))
                linked_relevance.update({m: share * value for m, value in hops.items()})
                candidates = score_all(None)
        if self.tuning.feedback_share > 0.0 and candidates:
            moved = self._feedback_search(
                view, candidates, query_vector, at, include_history, explicit
            )
            feedback.append(moved)
            ranked["feedback"] = [(view.ids[s], score) for s, score in moved.dense(k, routed)]
            candidates = score_all(None)
        best = max((c.relevance for c in candidates), default=0.0)
        if not may_fall_back or best >= self.policy.fallback_below:
            return candidates, False
        # Weak answer from the routed region: widen dense and activation to every region.
        first_pass = {c.fused.memory_id for c in candidates}
        ranked["dense"] = listed(search.base)
        ranked["activation"] = most_active(search.base)
        return score_all(first_pass), True

    def _feedback_search(
        self,
        view: NamespaceView,
        candidates: Sequence[_Candidate],
        query_vector: np.ndarray,
        at: datetime,
        include_history: bool,
        explicit: list[Region] | None,
    ) -> NamespaceSearch:
        """A search with the query moved towards the best answers so far (``hops``)."""
        best_first = sorted(candidates, key=lambda c: (-c.score, c.fused.memory_id))
        slots = [view.slot_of[c.fused.memory_id] for c in best_first[: self.tuning.feedback_seeds]]
        moved = feedback_vector(query_vector, view.matrix[slots], self.tuning.feedback_weight)
        return self._search(view, moved, at, include_history, explicit)

    def _search(
        self,
        view: NamespaceView,
        vector: np.ndarray,
        at: datetime,
        include_history: bool,
        regions: list[Region] | None,
        *,
        context: ContextReading | None = None,
    ) -> NamespaceSearch:
        """A search of ``view`` for ``vector`` under this engine's exactness and tuning; the
        question's own search reads memories in context (``hops.context``), its helpers not."""
        return NamespaceSearch(
            view,
            vector,
            at,
            include_history=include_history,
            regions=regions,
            exact=self.exact,
            window_references=self.tuning.window_references,
            context=context,
        )

    def _freshest_of_comparable(
        self,
        view: NamespaceView,
        slots: np.ndarray,
        rel: np.ndarray,
        fresh: np.ndarray,
        scores: np.ndarray,
    ) -> np.ndarray:
        """``scoring.freshest_of_comparable`` over the answers comparable with the best one.

        A procedure and a statement are never comparable remarks: "how did we fix it?" asks
        for the fix, however fresh a restatement of the problem is.
        """
        if scores.size < 2 or view.dimension is None:
            return scores
        best = int(np.argmax(scores))
        rows = view.matrix[slots]
        alike = (rows @ rows[best]).astype(np.float64) >= self.tuning.comparable_cosine
        procedural = view.region[slots] == REGION_CODE["procedural"]
        alike &= procedural == procedural[best]
        group = comparable_answers(rel, alike, best, self.tuning.comparable_margin)
        seed = final_score(
            rel, view.importance[slots], fresh, self.policy, self.tuning, wants_recent=True
        )
        return freshest_of_comparable(scores, seed, group)

    def _diversified(self, view: NamespaceView, candidates: list[_Candidate]) -> list[_Candidate]:
        """The best ``diversity_window`` candidates in MMR order (``hops.diversified``)."""
        head = candidates[: self.tuning.diversity_window]
        slots = np.fromiter(
            (view.slot_of[c.fused.memory_id] for c in head), dtype=np.int64, count=len(head)
        )
        order, adjusted = diversified(
            np.array([c.score for c in head], dtype=np.float64),
            view.matrix[slots],
            self.tuning.diversity_penalty,
        )
        reordered = [
            dataclasses.replace(head[i], score=value)
            for i, value in zip(order, adjusted, strict=True)
        ]
        tail = candidates[len(head) :]
        floor = reordered[-1].score if reordered else 0.0
        # The rest stay below the re-ranked head (the head's scores only went down).
        return reordered + [dataclasses.replace(c, score=min(c.score, floor)) for c in tail]

    def _spread_over_sessions(
        self, view: NamespaceView, candidates: list[_Candidate]
    ) -> list[_Candidate]:
        """The best ``spread_window`` candidates of a list question spread over sessions
        (``hops.spread_over_sessions``); the rest stay below them."""
        head = candidates[: self.hops.spread_window]
        sessions = [session_of(view.records[c.fused.memory_id]) for c in head]
        order, adjusted = spread_over_sessions(
            [c.score for c in head], sessions, self.hops.list_session_penalty
        )
        reordered = [
            dataclasses.replace(head[i], score=value)
            for i, value in zip(order, adjusted, strict=True)
        ]
        floor = reordered[-1].score if reordered else 0.0
        tail = candidates[len(head) :]
        return reordered + [dataclasses.replace(c, score=min(c.score, floor)) for c in tail]

    def _recalled(
        self, view: NamespaceView, candidate: _Candidate, include_history: bool
    ) -> RecalledMemory:
        record = view.records[candidate.fused.memory_id]
        return RecalledMemory(
            id=record.id,
            namespace=record.namespace,
            content=record.content,
            region=record.region,
            kind=record.kind,
            importance=record.importance,
            status=candidate.status,
            created_at=record.created_at,
            valid_from=record.valid_from,
            valid_to=record.valid_to,
            score=round(candidate.score, 6),
            relevance=round(candidate.relevance, 6),
            freshness=round(candidate.freshness, 6),
            fused=round(candidate.fused.rrf, 6),
            explanation={
                path: PathEvidence(rank=hit.rank, score=round(hit.score, 6))
                for path, hit in candidate.fused.paths.items()
            },
            provenance=list(record.provenance),
            superseded_by=record.superseded_by,
            supersede_chain=(supersede_chain(record, view.records.get) if include_history else []),
            history=list(record.history) if include_history else None,
            via_fallback=candidate.via_fallback,
        )

    def _fit(self, memories: list[RecalledMemory], budget_chars: int) -> list[RecalledMemory]:
        """Keep the leading memories whose context lines fit in ``budget_chars``."""
        kept: list[RecalledMemory] = []
        used = 0
        for memory in memories:
            cost = len(format_line(memory, max_chars=self.policy.memory_chars)) + (1 if kept else 0)
            if used + cost > budget_chars:
                break
            kept.append(memory)
            used += cost
        return kept

    @staticmethod
    def _trace(
        decision: RouteDecision,
        regions: list[Region],
        fallback_used: bool,
        window: TimeWindow | None,
        candidates: int,
    ) -> RecallTrace:
        return RecallTrace(
            route=decision.route,
            route_confidence=decision.confidence,
            route_reason=decision.reason,
            regions=regions,
            fallback_used=fallback_used,
            window_start=window.start if window else None,
            window_end=window.end if window else None,
            window_label=window.label if window else "",
            candidates=candidates,
        )


def _interleave(lists: Sequence[Sequence[tuple[str, float]]], k: int) -> list[tuple[str, float]]:
    """Round-robin over ranked lists, first place of each list first, each id once, ``k`` long."""
    merged: dict[str, float] = {}
    for rank in range(max((len(items) for items in lists), default=0)):
        for items in lists:
            if rank < len(items) and items[rank][0] not in merged:
                merged[items[rank][0]] = items[rank][1]
                if len(merged) == k:
                    return list(merged.items())
    return list(merged.items())
