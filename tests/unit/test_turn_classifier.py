"""The shipped turn classifier file: it loads, matches its manifest, answers deterministically,
refuses a tampered or mismatched file, and gets clear cases right (none taken from the corpus)."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pipeline.models.artefacts import MINILM
from pipeline.models.classifier import (
    DEFAULT_MODEL,
    LABEL_KIND,
    LEXICAL_FEATURES,
    NON_MEMORY_LABELS,
    WEIGHTS_DIR,
    ClassifierFileError,
    TurnClassifier,
    classifier_for,
    gram_features,
    lexical_features,
    load_turn_classifier,
)
from pipeline.models.encoders import (
    MODEL_DIMENSIONS,
    Encoder,
    EncoderUnavailable,
    load_encoder,
)
from pipeline.models.trained_files import versioned_id
from training.turn_classifier.corpus_stats import LABELS, load_corpus, normalise
from training.turn_classifier.data import corpus_sha256, embed
from training.turn_classifier.split import folds_of, in_first_release, split

# Written for this test, in the corpus' label definitions; none is a corpus turn (checked below).
CLEAR_CASES: dict[str, list[str]] = {
    "small_talk": ["haha that's wild, what a story", "哈哈哈太好笑了吧"],
    "filler": ["mm-hmm, go on", "嗯，行"],
    "greeting": ["good morning!", "早上好"],
    "thanks": ["thank you, that helped a lot", "非常感谢你"],
    "question": ["how do I reverse a list in Python?", "怎么把文件压缩成zip？"],
    "preference": ["I prefer dark mode in every editor", "我喜欢喝无糖的咖啡"],
    "fact": ["My daughter was born in March 2019", "我家住在杭州西湖区"],
    "task_state": [
        "I'm halfway through migrating the billing service",
        "数据迁移已经完成一半了",
    ],
    "procedure": [
        "To reset the router, hold the button for ten seconds and then unplug it",
        "先把数据库备份，然后再升级版本",
    ],
    "decision": [
        "We decided to move the weekly meeting to Thursdays",
        "我们决定下个月开始用 Kubernetes",
    ],
    "emotion": ["I'm really anxious about tomorrow's interview", "最近压力好大，睡不着"],
}


@pytest.fixture(scope="module")
def classifier() -> TurnClassifier:
    return load_turn_classifier()


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    try:
        return load_encoder("minilm")
    except EncoderUnavailable:
        pytest.skip("minilm encoder not installed")


def manifest() -> dict[str, object]:
    data: dict[str, object] = json.loads((WEIGHTS_DIR / f"{DEFAULT_MODEL}.json").read_text())
    return data


# -- the file ---------------------------------------------------------------------------------
def test_the_shipped_file_loads_and_matches_its_manifest(classifier: TurnClassifier) -> None:
    spec = manifest()
    training = spec["training"]
    assert isinstance(training, dict)

    assert classifier.id == spec["model_id"] == versioned_id(DEFAULT_MODEL, spec["weights_sha256"])  # type: ignore[arg-type]
    assert (
        classifier.id.startswith(f"{DEFAULT_MODEL}-")
        and len(classifier.id) == len(DEFAULT_MODEL) + 13
    )
    assert classifier.labels == LABELS
    assert set(spec["non_memory_labels"]) == set(NON_MEMORY_LABELS)  # type: ignore[call-overload]
    assert tuple(spec["lexical_features"]) == LEXICAL_FEATURES  # type: ignore[arg-type]
    assert classifier.encoder_name == MINILM.name
    assert classifier.dimension == MODEL_DIMENSIONS[MINILM.name]
    assert 0.0 < classifier.threshold < 1.0
    weights = WEIGHTS_DIR / str(spec["weights_file"])
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == spec["weights_sha256"]
    assert "scikit-learn" in spec["libraries"]  # type: ignore[operator]


def test_the_file_was_trained_on_this_corpus_and_its_training_quarters() -> None:
    training = manifest()["training"]
    assert isinstance(training, dict)
    turns = load_corpus()
    kept, held_back = split(turns)

    assert training["corpus_sha256"] == corpus_sha256(), "retrain: the corpus changed"
    assert (training["training_turns"], training["held_back_turns"]) == (
        len(kept),
        len(held_back),
    )


def test_the_split_holds_back_a_quarter_of_every_label_and_language_the_same_way_each_time() -> (
    None
):
    turns = load_corpus()
    kept, held = split(turns)
    _, again_held = split(list(reversed(turns)))

    assert {t.id for t in held} == {t.id for t in again_held}, "the file's order does not matter"
    assert not {t.id for t in kept} & {t.id for t in held}
    assert len(kept) + len(held) == len(turns)
    strata = Counter((t.label, t.lang) for t in turns if in_first_release(t.id))
    held_strata = Counter((t.label, t.lang) for t in held)
    for stratum, size in strata.items():
        assert held_strata[stratum] == -(-size // 4), stratum  # a quarter, rounded up


# sha256 of the held-back quarter's ids, sorted and joined by newlines: the 613 turns v1 was
# scored on. Turns added to the corpus must not move any turn across the split.
HELD_BACK_IDS_SHA256 = "71d50586ab999ed1afb2f3fb541e712291ce3ad71223c97cc7539b5b9216a9ef"


def test_turns_added_after_the_first_release_all_train_and_the_held_back_quarter_stays() -> None:
    turns = load_corpus()
    kept, held = split(turns)
    added = [t for t in turns if not in_first_release(t.id)]

    ids = "\n".join(sorted(t.id for t in held))
    assert hashlib.sha256(ids.encode()).hexdigest() == HELD_BACK_IDS_SHA256
    assert added, "the second release's turns are in the corpus"
    assert {t.id for t in added} <= {t.id for t in kept}
    # dropping the additions leaves the same split of the first release
    _, first_release_held = split([t for t in turns if in_first_release(t.id)])
    assert {t.id for t in first_release_held} == {t.id for t in held}


def test_the_folds_deal_each_stratum_of_the_training_turns_evenly() -> None:
    kept, _ = split(load_corpus())
    fold = folds_of(kept, 5)

    assert set(fold) == {t.id for t in kept}
    per_stratum: dict[tuple[str, str], Counter[int]] = {}
    for turn in kept:
        per_stratum.setdefault((turn.label, turn.lang), Counter())[fold[turn.id]] += 1
    for counts in per_stratum.values():
        assert max(counts.values()) - min(counts.get(f, 0) for f in range(5)) <= 1


def test_the_runtime_does_not_import_the_training_library() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pipeline.models.classifier as c; c.load_turn_classifier();"
        "print(any(m.split('.')[0] in {'sklearn', 'scipy'} for m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def copy_of_file(tmp_path: Path) -> Path:
    for suffix in ("json", "npz"):
        shutil.copy(WEIGHTS_DIR / f"{DEFAULT_MODEL}.{suffix}", tmp_path)
    return tmp_path / f"{DEFAULT_MODEL}.json"


def test_tampered_weights_are_refused(tmp_path: Path) -> None:
    copy_of_file(tmp_path)
    arrays = tmp_path / f"{DEFAULT_MODEL}.npz"
    arrays.write_bytes(arrays.read_bytes() + b"\0")

    with pytest.raises(ClassifierFileError, match="weights_sha256"):
        load_turn_classifier(directory=tmp_path)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("lexical_features", ["log_chars"], "lexical_features"),
        ("labels", [*LABELS[:-1], "gossip"], "labels"),
        ("keep_threshold", "high", "keep_threshold"),
        ("model_id", "turn-classifier-v0", "model_id"),
    ],
)
def test_a_manifest_that_does_not_match_the_code_is_refused(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    path = copy_of_file(tmp_path)
    spec = json.loads(path.read_text())
    spec[field] = value
    path.write_text(json.dumps(spec))

    with pytest.raises(ClassifierFileError, match=message):
        load_turn_classifier(directory=tmp_path)


def test_a_vector_of_another_size_is_refused(classifier: TurnClassifier) -> None:
    with pytest.raises(ClassifierFileError, match="vector"):
        classifier.classify("hello", np.zeros(512, dtype=np.float32))


# -- determinism ------------------------------------------------------------------------------
def random_vectors(count: int, dimension: int) -> np.ndarray:
    rows = np.random.default_rng(7).normal(size=(count, dimension)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_same_turn_gets_the_same_answer_bit_for_bit_in_any_batch(
    classifier: TurnClassifier,
) -> None:
    texts = ["ok", "We moved to Postgres", "我明天去上海出差", "lol", "how do I undo a commit?"]
    vectors = random_vectors(len(texts), classifier.input_dimension)

    batch = classifier.probabilities(texts, vectors)
    again = load_turn_classifier().probabilities(texts, vectors)
    one_by_one = np.vstack(
        [classifier.probabilities([t], [v]) for t, v in zip(texts, vectors, strict=True)]
    )
    reversed_batch = classifier.probabilities(texts[::-1], vectors[::-1])[::-1]

    assert batch.tobytes() == again.tobytes() == one_by_one.tobytes() == reversed_batch.tobytes()
    assert np.allclose(batch.sum(axis=1), 1.0)


def test_the_second_vector_of_a_turn_does_not_depend_on_its_batch(
    classifier: TurnClassifier,
) -> None:
    assert classifier.second_encoder_name is not None, "v3 reads the multilingual vector"
    texts = ["user: ok", "Wei: 我明天去上海出差", "Sam: we moved the billing service to Postgres"]
    first = random_vectors(len(texts), classifier.dimension)

    batch = classifier.input_vectors(texts, first)
    one_by_one = np.vstack(
        [classifier.input_vectors([t], [v]) for t, v in zip(texts, first, strict=True)]
    )
    reversed_batch = classifier.input_vectors(texts[::-1], first[::-1])[::-1]

    assert batch.shape == (len(texts), classifier.input_dimension)
    assert batch.tobytes() == one_by_one.tobytes() == reversed_batch.tobytes()
    assert np.array_equal(batch[:, : classifier.dimension], first)


def test_a_second_encoder_other_than_the_one_trained_on_is_refused(tmp_path: Path) -> None:
    path = copy_of_file(tmp_path)
    spec = json.loads(path.read_text())
    spec["second_encoder"]["id"] = "universal-sentence-encoder-multilingual-3/numpy-fp32@0"
    path.write_text(json.dumps(spec))

    other = load_turn_classifier(directory=tmp_path)
    with pytest.raises(ClassifierFileError, match="second_encoder"):
        other.input_vectors(["user: ok"], random_vectors(1, other.dimension))


def test_lexical_and_gram_features_are_pure_functions_of_the_text() -> None:
    text = "I'm 34, 我住在成都 — you? 😀 `make test`"
    features = lexical_features(text)
    indices, values = gram_features(text, 1 << 15)

    assert features.shape == (len(LEXICAL_FEATURES),)
    assert lexical_features(text).tobytes() == features.tobytes()
    named = dict(zip(LEXICAL_FEATURES, features, strict=True))
    assert named["has_question_mark"] == named["first_person_en"] == named["first_person_zh"] == 1.0
    assert named["second_person_en"] == named["has_digit"] == named["code_like"] == 1.0
    assert named["second_person_zh"] == 0.0
    assert 0.0 < named["cjk_share"] < 1.0
    again = gram_features(text, 1 << 15)
    assert again[0].tobytes() == indices.tobytes() and again[1].tobytes() == values.tobytes()
    assert np.isclose(np.linalg.norm(values), 1.0)
    assert gram_features("", 1 << 15)[0].size == 0


def test_emoji_are_not_features() -> None:
    # The corpus' few emoji texts are all small talk: an emoji on a statement must not count.
    plain = "climbing course wrapped up yesterday, got my belay certificate"
    for decorated in (plain + " 🙌", "🧗‍♀️ " + plain + " 👍🏽🇬🇧"):
        assert lexical_features(decorated).tobytes() == lexical_features(plain).tobytes()
        assert (
            gram_features(decorated, 1 << 15)[0].tobytes()
            == gram_features(plain, 1 << 15)[0].tobytes()
        )
    symbols = dict(zip(LEXICAL_FEATURES, lexical_features("5 ★ review"), strict=True))
    assert symbols["has_symbol_or_emoji"] == 1.0  # other symbols still count


# -- choosing it ------------------------------------------------------------------------------
def test_the_rules_setting_and_another_encoder_mean_no_learned_classifier(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert classifier_for("rules", MINILM.name) is None
    learned = classifier_for("learned", MINILM.name)
    assert learned is not None and learned.id == load_turn_classifier().id

    with caplog.at_level(logging.WARNING, logger="hindsight.classifier"):
        assert classifier_for("learned", "some-other-encoder") is None
        assert classifier_for("learned", "some-other-encoder") is None
    warnings = [r for r in caplog.records if "some-other-encoder" in r.getMessage()]
    assert len(warnings) == 1, "said once, not per batch"

    with pytest.raises(ClassifierFileError, match="gated, learned or rules"):
        classifier_for("Learned", MINILM.name)


def test_the_gated_setting_is_the_same_model_recorded_as_the_rules_gate() -> None:
    learned = classifier_for("learned", MINILM.name)
    gate = classifier_for("gated", MINILM.name)

    assert learned is not None and gate is not None
    assert (learned.mode, gate.mode) == ("learned", "gate")
    assert gate.id == f"rules-v1+gate-v4:{learned.id}"
    assert classifier_for("gated", "some-other-encoder") is None


# -- clear cases ------------------------------------------------------------------------------
def test_the_clear_cases_are_not_corpus_turns() -> None:
    corpus = {normalise(t.text) for t in load_corpus()}
    cases = [text for texts in CLEAR_CASES.values() for text in texts]

    assert not [text for text in cases if normalise(text) in corpus]
    assert set(CLEAR_CASES) == set(LABELS)


@pytest.mark.parametrize(
    ("label", "text"), [(label, text) for label, texts in CLEAR_CASES.items() for text in texts]
)
def test_clear_cases_are_filtered_or_kept_as_their_kind(
    classifier: TurnClassifier, encoder: Encoder, label: str, text: str
) -> None:
    [vector] = classifier.input_vectors([f"user: {text}"], encoder.encode([f"user: {text}"]))
    verdict = classifier.classify(text, vector)

    assert verdict.remember is (label not in NON_MEMORY_LABELS), verdict.reason
    assert verdict.kind == LABEL_KIND[label], verdict.reason


# -- in prepare -------------------------------------------------------------------------------
def test_prepare_records_the_shipped_id_and_uses_its_decision(
    classifier: TurnClassifier, encoder: Encoder
) -> None:
    from ingest_support import Log

    from pipeline.ingest.prepare import prepare_batch
    from schemas.codec import decode_prepared

    log = Log()
    thanks, fact = CLEAR_CASES["thanks"][0], CLEAR_CASES["fact"][0]
    learned = classifier_for("learned", encoder.name)
    assert learned is not None

    batch = prepare_batch([log.turn(thanks), log.turn(fact)], encoder, classifier=learned)

    filtered, kept = [decode_prepared(value) for value in batch.values]
    assert filtered.models.classifier == kept.models.classifier == classifier.id
    assert filtered.analysis is not None and not filtered.analysis.remember
    assert filtered.analysis.reason.startswith("learned: thanks")
    assert kept.analysis is not None and kept.analysis.remember and kept.analysis.kind == "fact"
    assert kept.analysis.vector_b64 is not None


def test_second_vectors_computed_beside_the_first_encoder_change_nothing_prepared(
    encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingest_support import Log

    from pipeline.ingest import prepare
    from pipeline.models.attributes import attribute_model_for

    log = Log()
    gate = classifier_for("gated", encoder.name)
    attributes = attribute_model_for(encoder.name, True)
    assert gate is not None and gate.second_encoder_name is not None and attributes is not None
    texts = [
        *CLEAR_CASES["thanks"][:2],
        CLEAR_CASES["fact"][0],
        "ok",
        "My editor is Vim.",
        "我现在用的手机是Pixel 8。",
        # longer than the gate judges: the rules' alone, its statement read by the attribute model
        "After the reorg last month I report to Lindiwe now, and our one-to-ones are on Mondays.",
    ]
    messages = [log.turn(text) for text in texts]
    asked: list[tuple[list[str], list[str]]] = []
    real_ahead = prepare.second_vectors_ahead

    def recording_ahead(*args: object) -> object:
        asked.append((list(args[1]), list(args[3])))  # type: ignore[call-overload]
        return real_ahead(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(prepare, "second_vectors_ahead", recording_ahead)
    ahead = prepare.prepare_batch(messages, encoder, classifier=gate, attributes=attributes)
    monkeypatch.setattr(prepare, "second_vectors_ahead", lambda *args: None)
    in_turn = prepare.prepare_batch(messages, encoder, classifier=gate, attributes=attributes)

    [(for_classifier, for_attributes)] = asked
    assert for_classifier and for_attributes  # both models had vectors computed ahead
    assert ahead.values == in_turn.values


class _PaddingEncoder:
    """An encoder whose vectors move with the batch's longest text, as a padded batch's do."""

    name = "padding-test"
    id = "padding-test/numpy-fp32@0"
    dimension = 2

    def encode(self, texts: list[str]) -> np.ndarray:
        longest = max((len(text) for text in texts), default=0)
        return np.array([[len(text), 1e-7 * longest] for text in texts], np.float32)


def test_training_vectors_do_not_depend_on_what_the_cache_already_held(tmp_path: Path) -> None:
    # A cache filled over two runs must give the vectors a fresh one gives, or a clean clone
    # retrains other weights than the shipped file (v4's threshold moved 0.39 -> 0.40 this way).
    texts = ["ok", "a much longer turn about the weekend", "thanks!"]
    encoder = _PaddingEncoder()
    embed(encoder, texts[:1], tmp_path / "in-two-runs")
    in_two_runs = embed(encoder, texts, tmp_path / "in-two-runs")
    fresh = embed(encoder, texts, tmp_path / "fresh")
    uncached = embed(encoder, texts, None)
    assert in_two_runs.tobytes() == fresh.tobytes() == uncached.tobytes()
    assert embed(encoder, [], None).shape == (0, 2)
