"""The generalisation suite: both halves exist, every behaviour is covered, the split is seeded.

``scenarios/generalisation/{tune,test}/<category>.yaml`` hold scenarios written fresh, without
reading the rules. Names carry the behaviour: ``g-<behaviour>-<en|zh>-<nn>``, where the behaviour's
first word names the category (``pref-switch`` belongs to ``preference_update``). Each
behaviour's scenarios in one language are numbered 01..N and split in matched pairs by a seeded
hash (see ``half_of``), so neither half was chosen by looking at results. docs/SCENARIOS.md
describes the suite; this test keeps its shape honest.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from bench.scenarios.format import CATEGORIES, LoadedScenario, load_scenarios, parse_scenario_file
from bench.scenarios.steps import RecallStep

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "scenarios" / "generalisation"
HALVES = ("tune", "test")
LANGUAGES = ("en", "zh")
SPLIT_SEED = "hindsight-generalisation-v1"
MIN_PER_HALF_AND_LANGUAGE = 4
MIN_BEHAVIOURS_PER_CATEGORY = 2

NAME = re.compile(r"^g-(?P<behaviour>[a-z]+-[a-z]+)-(?P<language>en|zh)-(?P<number>\d{2})$")

# The first word of a behaviour names its category.
CATEGORY_OF_PREFIX = {
    "xs": "cross_session",
    "tr": "time_range",
    "ent": "entity_lookup",
    "para": "paraphrase",
    "pref": "preference_update",
    "forget": "forgetting",
    "chat": "chit_chat",
    "noise": "noise_resilience",
    "proc": "procedural",
    "decay": "decay",
    "iso": "isolation",
}


def half_of(behaviour: str, language: str, number: int) -> str:
    """The half a scenario belongs to: in each pair (01,02), (03,04), ... a seeded hash picks
    which one goes to ``tune``; the other goes to ``test``."""
    pair = (number + 1) // 2
    digest = hashlib.sha256(f"{SPLIT_SEED}/{behaviour}/{language}/{pair}".encode()).digest()
    first_of_pair_in_tune = digest[0] % 2 == 0
    return "tune" if (number % 2 == 1) == first_of_pair_in_tune else "test"


def _parts(item: LoadedScenario) -> tuple[str, str, int]:
    match = NAME.match(item.name)
    assert match, f"{item.name}: expected g-<behaviour>-<en|zh>-<nn>"
    return match["behaviour"], match["language"], int(match["number"])


@pytest.fixture(scope="module")
def suite() -> list[LoadedScenario]:
    return load_scenarios([SUITE])


@pytest.mark.parametrize(
    "path", sorted(SUITE.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_every_file_validates_and_sits_in_its_category_file(path: Path) -> None:
    loaded = parse_scenario_file(path.read_text(encoding="utf-8"), path)
    assert loaded, f"{path} holds no scenario"
    assert path.parent.name in HALVES, f"{path} is not in tune/ or test/"
    for item in loaded:
        assert item.category == path.stem, f"{item.name} ({item.category}) is in {path}"


def test_both_halves_exist_for_every_category() -> None:
    for half in HALVES:
        present = {path.stem for path in (SUITE / half).glob("*.yaml")}
        assert present == set(CATEGORIES), (half, sorted(set(CATEGORIES) ^ present))


def test_names_carry_behaviour_language_and_category(suite: list[LoadedScenario]) -> None:
    for item in suite:
        behaviour, language, _ = _parts(item)
        assert language == item.language, f"{item.name} is marked {item.language}"
        prefix = behaviour.split("-")[0]
        assert CATEGORY_OF_PREFIX.get(prefix) == item.category, (
            f"{item.name}: behaviour {behaviour!r} does not belong to {item.category}"
        )
        # The description opens with the behaviour, so a failing report reads on its own.
        assert re.match(rf"^{behaviour}[.。]", item.scenario.description), item.name


def test_every_behaviour_has_enough_scenarios_in_each_half(suite: list[LoadedScenario]) -> None:
    counts = Counter((_parts(i)[0], i.language, i.path.parent.name) for i in suite)
    behaviours_by_category: dict[str, set[str]] = defaultdict(set)
    for item in suite:
        behaviours_by_category[item.category].add(_parts(item)[0])
    for category in CATEGORIES:
        behaviours = behaviours_by_category[category]
        assert len(behaviours) >= MIN_BEHAVIOURS_PER_CATEGORY, (category, sorted(behaviours))
        for behaviour in behaviours:
            for language in LANGUAGES:
                for half in HALVES:
                    count = counts[(behaviour, language, half)]
                    assert count >= MIN_PER_HALF_AND_LANGUAGE, (behaviour, language, half, count)


def test_split_follows_the_seeded_rule(suite: list[LoadedScenario]) -> None:
    numbers: dict[tuple[str, str], list[int]] = defaultdict(list)
    for item in suite:
        behaviour, language, number = _parts(item)
        numbers[(behaviour, language)].append(number)
        expected = half_of(behaviour, language, number)
        assert item.path.parent.name == expected, (
            f"{item.name} is in {item.path.parent.name}/, the seeded split puts it in {expected}/"
        )
    for key, found in numbers.items():
        assert sorted(found) == list(range(1, len(found) + 1)), (key, sorted(found))
        assert len(found) % 2 == 0, f"{key}: scenarios are added in pairs"


def test_names_are_unique_across_the_repository() -> None:
    everything = load_scenarios([ROOT / "scenarios"])  # raises on a name used in two files
    names = [item.name for item in everything]
    assert len(names) == len(set(names))
    for item in everything:
        in_suite = SUITE in item.path.parents
        assert item.name.startswith("g-") == in_suite, f"{item.name} in {item.path}"


def test_queries_are_in_the_scenario_language(suite: list[LoadedScenario]) -> None:
    cjk = re.compile(r"[\u4e00-\u9fff]")
    for item in suite:
        queries = [step.query for step in item.scenario.steps if isinstance(step, RecallStep)]
        if item.language == "zh":
            assert any(cjk.search(query) for query in queries), item.name
        else:
            assert not any(cjk.search(query) for query in queries), item.name
