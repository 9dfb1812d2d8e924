"""``python -m bench.locomo.offline --loo``: every recall idea measured leave-one-conversation-out.

An *idea* is a switch or a knob with a few options; option 0 is how the system behaved before
the idea (so all ideas at option 0 are the baseline, measured in the same run). For each
held-out conversation the options are chosen on the other four by coordinate ascent (each idea
in turn takes the option with the best pooled training score, until nothing changes; ties keep
the current option), then scored on the held-out one (``folds.leave_one_out`` does the same for
a fixed candidate list). Reported per idea: the idea alone on top of the baseline, and the full
choice with and without it. An idea is kept only if it helps on held-out folds.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.locomo.dataset import ADVERSARIAL
from bench.locomo.folds import (
    METRIC,
    FoldResult,
    fold_result,
    pooled_mean,
    render_folds,
    samples_of,
    summarise,
)
from bench.locomo.metrics import QuestionScore
from pipeline.recall.hops import DEFAULT_HOPS, HopTuning
from pipeline.recall.scoring import DEFAULT_TUNING, RecallTuning

EXCLUDE = frozenset({ADVERSARIAL})


@dataclass(frozen=True)
class Config:
    """One complete configuration: the ingest side (which record set) and the recall tuning."""

    time_notes: bool
    tuning: RecallTuning
    hops: HopTuning = DEFAULT_HOPS


Change = Callable[[Config], Config]


@dataclass(frozen=True)
class Idea:
    name: str
    what: str
    # (label, change); the first is the behaviour before the idea.
    options: tuple[tuple[str, Change], ...]


def _tune(**changes: Any) -> Change:
    return lambda config: dataclasses.replace(
        config, tuning=dataclasses.replace(config.tuning, **changes)
    )


def _hop(**changes: Any) -> Change:
    return lambda config: dataclasses.replace(
        config, hops=dataclasses.replace(config.hops, **changes)
    )


def _path(name: str, weight: float) -> Change:
    def change(config: Config) -> Config:
        weights = {**config.tuning.path_weights, name: weight}
        return dataclasses.replace(
            config, tuning=dataclasses.replace(config.tuning, path_weights=weights)
        )

    return change


def _notes(on: bool) -> Change:
    return lambda config: dataclasses.replace(config, time_notes=on)


IDEAS: tuple[Idea, ...] = (
    Idea(
        "time_notes",
        "relative dates in a turn resolved at ingest and appended to its search text",
        (("off", _notes(False)), ("on", _notes(True))),
    ),
    Idea(
        "window_references",
        "a named time window also matches memories whose words name a time inside it",
        (("off", _tune(window_references=False)), ("on", _tune(window_references=True))),
    ),
    Idea(
        "ignore_empty_window",
        "a named window no memory falls in is ignored; its words count as keywords again",
        (("off", _tune(ignore_empty_window=False)), ("on", _tune(ignore_empty_window=True))),
    ),
    Idea(
        "when_time_bonus",
        "a 'when' question adds relevance to memories whose words name a time",
        tuple((f"{b:g}", _tune(when_time_bonus=b)) for b in (0.0, 0.1)),
    ),
    Idea(
        "speaker_focus",
        "a query naming one speaker: what the other speakers said counts this much",
        tuple((f"{f:g}", _tune(speaker_focus_factor=f)) for f in (1.0, 0.85, 0.7, 0.55)),
    ),
    Idea(
        "links",
        "one hop across sessions from the 5 best answers (shared specific entity or cosine >= "
        "0.6): the linked memory inherits share x strength x the answer's relevance",
        tuple((f"{x:g}", _tune(link_share=x)) for x in (0.0, 0.5, 0.7)),
    ),
    Idea(
        "decompose",
        "a question joining two facts: its parts recalled too; relevance >= share x part's",
        tuple((f"{x:g}", _tune(decompose_share=x)) for x in (0.0, 0.9, 1.0)),
    ),
    Idea(
        "speaker_names",
        "a query naming a speaker is searched without the name: as a keyword or in the vector it "
        "favours the other speaker's turns that address them (the focus still reads it)",
        tuple((v, _tune(speaker_names=v)) for v in ("keep", "lexical", "both")),
    ),
    Idea(
        "diversity",
        "maximal marginal relevance over the best 30: a place costs penalty x the cosine with the "
        "nearest answer already placed",
        tuple((f"{x:g}", _tune(diversity_penalty=x)) for x in (0.0, 0.05, 0.1)),
    ),
    Idea(
        "feedback",
        "the query moved towards its 3 best answers is searched again; relevance >= share x "
        "cosine with it",
        tuple((f"{x:g}", _tune(feedback_share=x)) for x in (0.0, 0.7)),
    ),
    Idea(
        "question_turns",
        "a memory that mostly asks (over 60 % of its words in questions) counts this much, "
        "unless the query is about what was asked",
        tuple((f"{x:g}", _hop(question_factor=x)) for x in (1.0, 0.6)),
    ),
    Idea(
        "list_spread",
        "a list-shaped question ('What activities ...', 'What are ...', 哪些): among the best 30, "
        "a place costs penalty x the answers from the same session already placed",
        tuple((f"{x:g}", _hop(list_session_penalty=x)) for x in (0.0, 0.01, 0.02)),
    ),
    Idea(
        "list_focus",
        "a list-shaped question naming one speaker: what the others said counts this much more "
        "(on top of the speaker focus)",
        tuple((f"{x:g}", _hop(list_focus_factor=x)) for x in (1.0, 0.85, 0.5, 0.3)),
    ),
    Idea(
        "context",
        "a memory read in its conversation: its dense evidence is the better of its own cosine "
        "and share x the cosine of its vector + 0.5 x the previous turn's + 0.3 x the next's",
        tuple((f"{x:g}", _hop(context_share=x)) for x in (0.0, 0.95, 1.0)),
    ),
    Idea(
        "context_after",
        "with the context reading on: the weight of the next turn's vector",
        tuple((f"{x:g}", _hop(context_after=x)) for x in (0.3, 0.0, 0.5)),
    ),
    Idea(
        "current_value",
        "a 'now / still / 现在' query: the newest answer within this relevance margin first",
        (
            ("off", _tune(current_value_margin=None)),
            ("0.08", _tune(current_value_margin=0.08)),
            ("0.15", _tune(current_value_margin=0.15)),
        ),
    ),
    Idea(
        "comparable",
        "answers within this relevance margin of the best whose vectors are alike to its vector "
        "(cosine >= 0.5) hold their places in the seed formula's order: the fresher first",
        tuple((f"{x:g}", _tune(comparable_margin=x)) for x in (0.0, 0.1)),
    ),
)


def apply(options: Mapping[str, str], ideas: Sequence[Idea] = IDEAS) -> Config:
    """The configuration with each idea at the named option (default: the shipped defaults)."""
    config = Config(time_notes=True, tuning=DEFAULT_TUNING)
    for idea in ideas:
        label = options.get(idea.name)
        if label is None:
            continue
        change = dict(idea.options).get(label)
        if change is None:
            raise ValueError(f"{idea.name}: no option {label!r}")
        config = change(config)
    return config


def select(names: Sequence[str] | None, ideas: Sequence[Idea] = IDEAS) -> tuple[Idea, ...]:
    """The named ideas (all when ``names`` is None); the others stay at the shipped defaults."""
    if names is None:
        return tuple(ideas)
    known = {idea.name: idea for idea in ideas}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"ideas: no idea named {unknown} (known: {sorted(known)})")
    return tuple(known[name] for name in dict.fromkeys(names))


def baseline_choice(ideas: Sequence[Idea] = IDEAS) -> dict[str, str]:
    return {idea.name: idea.options[0][0] for idea in ideas}


def default_choice(ideas: Sequence[Idea] = IDEAS) -> dict[str, str]:
    """The option of each idea the shipped defaults correspond to."""
    return {idea.name: _default_label(idea) for idea in ideas}


def _default_label(idea: Idea) -> str:
    shipped = apply({}, [idea])
    for label, change in idea.options:
        if change(shipped) == shipped:
            return label
    raise ValueError(f"{idea.name}: the shipped defaults match none of its options")


def name_of(choice: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(choice.items()))


Evaluate = Callable[[Config], list[QuestionScore]]


class Scores:
    """Per-question scores of each configuration, computed once (a cache keyed by the choice)."""

    def __init__(
        self, evaluate: Evaluate, ideas: Sequence[Idea] = IDEAS, *, verbose: bool = False
    ) -> None:
        self._evaluate = evaluate
        self.ideas = tuple(ideas)
        self.verbose = verbose
        self.by_name: dict[str, list[QuestionScore]] = {}
        self._defaults = default_choice(self.ideas)

    def of(self, choice: Mapping[str, str]) -> list[QuestionScore]:
        full = {**self._defaults, **choice}
        name = name_of(full)
        if name not in self.by_name:
            started = time.perf_counter()
            self.by_name[name] = self._evaluate(apply(full, self.ideas))
            if self.verbose:
                took = time.perf_counter() - started
                print(f"[{len(self.by_name)}] {took:.1f}s {name}", flush=True)
        return self.by_name[name]

    def train_score(self, choice: Mapping[str, str], training: set[str]) -> float:
        value, _ = pooled_mean(self.of(choice), training, METRIC, EXCLUDE)
        return value or 0.0


def coordinate_ascent(
    scores: Scores,
    training: set[str],
    start: Mapping[str, str],
    ideas: Sequence[Idea],
    max_rounds: int = 2,
) -> dict[str, str]:
    """Each idea in turn takes its best option on ``training`` until nothing changes (ties keep
    the current option)."""
    choice = dict(start)
    for _ in range(max_rounds):
        changed = False
        for idea in ideas:
            best_label, best = choice[idea.name], scores.train_score(choice, training)
            for label, _change in idea.options:
                value = scores.train_score({**choice, idea.name: label}, training)
                if value > best + 1e-12:
                    best_label, best = label, value
            if best_label != choice[idea.name]:
                choice[idea.name] = best_label
                changed = True
        if not changed:
            break
    return choice


def _label(choice: Mapping[str, str], names: Collection[str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(choice.items()) if k in names) or "fixed"


def fixed_folds(
    scores: Scores, samples: Sequence[str], choice: Mapping[str, str]
) -> list[FoldResult]:
    """One configuration for every fold (nothing chosen): its score on each conversation."""
    return [
        fold_result(scores.of(choice), s, "fixed", scores.train_score(choice, set(samples) - {s}))
        for s in samples
    ]


def chosen_choices(
    scores: Scores, samples: Sequence[str], start: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """Per held-out conversation, every idea chosen on the other conversations."""
    return {
        held_out: coordinate_ascent(scores, set(samples) - {held_out}, start, scores.ideas)
        for held_out in samples
    }


def folds_of(
    scores: Scores, choices: Mapping[str, Mapping[str, str]], names: Collection[str]
) -> list[FoldResult]:
    samples = list(choices)
    return [
        fold_result(
            scores.of(choice),
            held_out,
            _label(choice, names),
            scores.train_score(choice, set(samples) - {held_out}),
        )
        for held_out, choice in choices.items()
    ]


def run_ideas(scores: Scores, samples: Sequence[str]) -> dict[str, Any]:
    """Baseline and defaults (fixed), the LOO choice, and per idea: alone and left out.

    - ``loo``: per fold, coordinate ascent over every idea on the other conversations, starting
      from the shipped defaults.
    - ``ideas[name].alone``: the idea's options on top of the baseline, chosen per fold.
    - ``ideas[name].without``: each fold's LOO choice with that idea at its first option.
    """
    ideas = scores.ideas
    names = [idea.name for idea in ideas]
    base = baseline_choice(ideas)
    defaults = default_choice(ideas)
    loo_choices = chosen_choices(scores, samples, defaults)
    loo = summarise(folds_of(scores, loo_choices, names))
    baseline = summarise(fixed_folds(scores, samples, base))
    results: dict[str, Any] = {
        "metric": METRIC,
        "excluded_categories": sorted(EXCLUDE),
        "baseline": baseline,
        "defaults": summarise(fixed_folds(scores, samples, defaults)),
        "loo": loo,
        "baseline_choice": base,
        "defaults_choice": defaults,
        "ideas": {},
    }
    for idea in ideas:
        candidates = [{**base, idea.name: label} for label, _ in idea.options]
        alone_choices = {
            held_out: max(
                candidates,
                key=lambda c: (
                    scores.train_score(c, set(samples) - {held_out}),
                    -candidates.index(c),
                ),
            )
            for held_out in samples
        }
        alone = summarise(folds_of(scores, alone_choices, [idea.name]))
        without_choices = {
            held_out: {**choice, idea.name: idea.options[0][0]}
            for held_out, choice in loo_choices.items()
        }
        without = summarise(folds_of(scores, without_choices, names))
        results["ideas"][idea.name] = {
            "what": idea.what,
            "options": [label for label, _ in idea.options],
            "default": defaults[idea.name],
            "alone": alone,
            "without": without,
            "alone_gain": _gain(alone, baseline),
            "gain_over_without": _gain(loo, without),
        }
    return results


def _gain(new: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, float | None]:
    def diff(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a - b

    return {
        "mean": diff(new["mean"], old["mean"]),
        "min": diff(new["min"], old["min"]),
        "folds_better": sum(
            1 for n, o in zip(new["folds"], old["folds"], strict=True) if n["score"] > o["score"]
        ),
        "folds_worse": sum(
            1 for n, o in zip(new["folds"], old["folds"], strict=True) if n["score"] < o["score"]
        ),
    }


def render(results: Mapping[str, Any]) -> str:
    lines = [
        render_folds(
            "LoCoMo leave-one-conversation-out",
            {
                "baseline": results["baseline"],
                "defaults": results["defaults"],
                "LOO choice": results["loo"],
            },
        ),
        "| idea | alone: mean (Δ) | alone: min | alone: folds +/− | full choice without it: "
        "mean | with it: Δ mean | Δ min | folds +/− |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, idea in results["ideas"].items():
        alone, gain, without = idea["alone"], idea["alone_gain"], idea["without"]
        full = idea["gain_over_without"]
        lines.append(
            f"| {name} | {alone['mean']:.3f} ({gain['mean']:+.3f}) | {alone['min']:.3f} | "
            f"{gain['folds_better']}/{gain['folds_worse']} | {without['mean']:.3f} | "
            f"{full['mean']:+.3f} | {full['min']:+.3f} | "
            f"{full['folds_better']}/{full['folds_worse']} |"
        )
    return "\n".join(lines)


__all__ = [
    "IDEAS",
    "Config",
    "Idea",
    "Scores",
    "apply",
    "baseline_choice",
    "chosen_choices",
    "coordinate_ascent",
    "fixed_folds",
    "folds_of",
    "render",
    "run_ideas",
    "samples_of",
    "select",
]
