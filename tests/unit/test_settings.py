"""``Settings.from_env``: parsed once, strictly, into a frozen object (STYLE #11, avoid #4)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pipeline.runtime.settings import (
    MemoryPolicy,
    RecallPolicy,
    Settings,
    SettingsError,
    parse_bool_env,
)
from schemas.errors import HindsightError


def test_empty_environment_gives_the_defaults() -> None:
    settings = Settings.from_env({})

    assert settings == Settings()
    assert settings.data_dir == Path(".hindsight")
    assert settings.bootstrap is None
    assert settings.milvus_uri is None
    assert settings.topic_prefix == ""
    assert settings.partitions == 4
    assert settings.replication_factor == 1
    assert settings.encoder == "minilm"
    assert settings.batch_size == 64
    assert settings.api_port == 8765
    assert settings.llm_base_url is None


def test_policy_defaults_are_the_seeds_numbers() -> None:
    memory = Settings.from_env({}).memory
    recall = Settings.from_env({}).recall

    assert memory.duplicate_cosine == 0.92
    assert memory.link_cosine == 0.85
    assert memory.light_consolidation_every == 20
    assert memory.idle_consolidation_seconds == 300.0
    assert (recall.weight_similarity, recall.weight_importance, recall.weight_freshness) == (
        0.6,
        0.25,
        0.15,
    )
    assert recall.fallback_below == 0.6
    assert (recall.gap_one, recall.gap_two, recall.max_results) == (0.15, 0.05, 5)


def test_variables_are_parsed_into_typed_fields() -> None:
    settings = Settings.from_env(
        {
            "HINDSIGHT_DATA_DIR": "/var/lib/hindsight",
            "HINDSIGHT_BOOTSTRAP": "broker:9092",
            "HINDSIGHT_MILVUS_URI": "http://milvus:19530",
            "HINDSIGHT_TOPIC_PREFIX": "dev.",
            "HINDSIGHT_APP_ID": "worker-a",
            "HINDSIGHT_ENCODER": "use",
            "HINDSIGHT_PARTITIONS": "12",
            "HINDSIGHT_REPLICATION_FACTOR": "3",
            "HINDSIGHT_BATCH_SIZE": "128",
            "HINDSIGHT_API_PORT": "9000",
            "HINDSIGHT_BATCH_WINDOW_S": "0.25",
            "HINDSIGHT_API_HOST": "0.0.0.0",
            "HINDSIGHT_LLM_MODEL": "small",
        }
    )

    assert settings.data_dir == Path("/var/lib/hindsight")
    assert settings.bootstrap == "broker:9092"
    assert settings.milvus_uri == "http://milvus:19530"
    assert settings.milvus_path == "http://milvus:19530"
    assert settings.topic_prefix == "dev."
    assert settings.app_id == "worker-a"
    assert settings.encoder == "use"
    assert settings.partitions == 12
    assert isinstance(settings.partitions, int)
    assert settings.replication_factor == 3
    assert settings.batch_size == 128
    assert settings.api_port == 9000
    assert settings.batch_window_s == 0.25
    assert settings.api_host == "0.0.0.0"
    assert settings.llm_model == "small"


def test_milvus_path_defaults_to_a_lite_file_under_data_dir() -> None:
    settings = Settings.from_env({"HINDSIGHT_DATA_DIR": "/data"})

    assert settings.milvus_path == str(Path("/data") / "milvus" / "hindsight.db")


def test_kafka_bootstrap_is_a_fallback_and_hindsight_bootstrap_wins() -> None:
    assert Settings.from_env({"KAFKA_BOOTSTRAP": "k:1"}).bootstrap == "k:1"
    both = {"KAFKA_BOOTSTRAP": "k:1", "HINDSIGHT_BOOTSTRAP": "h:2"}
    assert Settings.from_env(both).bootstrap == "h:2"


def test_empty_string_variables_keep_the_default() -> None:
    settings = Settings.from_env({"HINDSIGHT_BOOTSTRAP": "", "HINDSIGHT_ENCODER": ""})

    assert settings.bootstrap is None
    assert settings.encoder == "minilm"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("HINDSIGHT_PARTITIONS", "four"),
        ("HINDSIGHT_PARTITIONS", "4.0"),
        ("HINDSIGHT_PARTITIONS", ""),
        ("HINDSIGHT_REPLICATION_FACTOR", "3x"),
        ("HINDSIGHT_BATCH_SIZE", "lots"),
        ("HINDSIGHT_API_PORT", "http"),
        ("HINDSIGHT_BATCH_WINDOW_S", "fast"),
        ("HINDSIGHT_BATCH_WINDOW_S", ""),
    ],
)
def test_a_bad_number_raises_settings_error_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({variable: value})

    assert variable in str(caught.value)
    assert repr(value) in str(caught.value)


@pytest.mark.parametrize("encoder", ["bert", "MiniLM", "openai"])
def test_an_unknown_encoder_raises_settings_error(encoder: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"HINDSIGHT_ENCODER": encoder})

    assert "HINDSIGHT_ENCODER" in str(caught.value)
    assert encoder in str(caught.value)


def test_settings_error_has_the_hindsight_root() -> None:
    assert issubclass(SettingsError, HindsightError)


def test_unrelated_variables_are_ignored() -> None:
    assert Settings.from_env({"PATH": "/bin", "HINDSIGHT_UNKNOWN": "x"}) == Settings()


def test_an_explicit_mapping_does_not_read_the_process_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HINDSIGHT_PARTITIONS", "not a number")

    assert Settings.from_env({}).partitions == 4
    with pytest.raises(SettingsError, match="HINDSIGHT_PARTITIONS"):
        Settings.from_env()


def test_process_environment_is_read_when_no_mapping_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HINDSIGHT_BATCH_SIZE", "7")

    assert Settings.from_env().batch_size == 7


def test_settings_and_policies_are_frozen() -> None:
    settings = Settings.from_env({})

    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.partitions = 8  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.memory.duplicate_cosine = 0.5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.recall.max_results = 10  # type: ignore[misc]


def test_instances_do_not_share_mutable_policies() -> None:
    assert Settings().memory == MemoryPolicy()
    assert Settings().recall == RecallPolicy()
    assert Settings().memory is not Settings().memory


def test_with_overrides_returns_a_new_object_and_skips_none() -> None:
    settings = Settings()
    changed = settings.with_overrides(partitions=2, bootstrap=None, topic_prefix="x.")

    assert changed is not settings
    assert changed.partitions == 2
    assert changed.topic_prefix == "x."
    assert changed.bootstrap is None
    assert settings.partitions == 4


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("true", True), ("YES", True), (" on ", True), ("0", False), ("false", False)],
)
def test_parse_bool_env_is_strict(raw: str, expected: bool) -> None:
    assert parse_bool_env("HINDSIGHT_FLAG", {"HINDSIGHT_FLAG": raw}) is expected


def test_parse_bool_env_rejects_other_words_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match="HINDSIGHT_FLAG"):
        parse_bool_env("HINDSIGHT_FLAG", {"HINDSIGHT_FLAG": "maybe"})


def test_parse_bool_env_default_when_unset() -> None:
    assert parse_bool_env("HINDSIGHT_FLAG", {}) is False
    assert parse_bool_env("HINDSIGHT_FLAG", {}, default=True) is True


@pytest.mark.parametrize(
    "encoder", ["minilm", "minilm-torch", "minilm-onnx", "minilm-onnx-int8", "use"]
)
def test_every_encoder_name_is_accepted(encoder: str) -> None:
    assert Settings.from_env({"HINDSIGHT_ENCODER": encoder}).encoder == encoder


def test_the_unknown_encoder_error_lists_the_names() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"HINDSIGHT_ENCODER": "minilm-onnx-fp16"})
    assert "minilm-onnx-int8" in str(caught.value)


def test_encoder_threads_parse_strictly() -> None:
    assert Settings.from_env({}).encoder_threads is None
    assert Settings.from_env({"HINDSIGHT_ENCODER_THREADS": "2"}).encoder_threads == 2
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(SettingsError) as caught:
            Settings.from_env({"HINDSIGHT_ENCODER_THREADS": bad})
        assert "HINDSIGHT_ENCODER_THREADS" in str(caught.value)
