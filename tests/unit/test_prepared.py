"""``schemas.prepared``: what travels on the prepared topic round-trips exactly — vectors bit for
bit through base64 — and a bad prepared message fails naming the field."""

from __future__ import annotations

import base64

import numpy as np
import orjson
import pytest
from ingest_support import T0

from schemas.codec import decode_prepared, encode
from schemas.errors import InvalidEvent
from schemas.events import CommandIssued, MemoriesRecalled, RecallHit, TurnRecorded
from schemas.memory import Triplet
from schemas.prepared import (
    EventPrepared,
    LogPosition,
    ModelIds,
    Rejected,
    TurnAnalysis,
    decode_vector,
    encode_vector,
)

SOURCE = LogPosition(topic="hindsight.events.v1", partition=1, offset=12, timestamp_ms=99)
MODELS = ModelIds(encoder="enc/test", classifier="rules-v1")
AWKWARD = np.array(
    [0.1, -0.0, 1e-45, 3.4028235e38, -1.1754944e-38, 1 / 3, np.pi, -2.5e-7], dtype=np.float32
)


def turn() -> TurnRecorded:
    return TurnRecorded(
        event_id="t1", namespace="acme", event_time=T0, session_id="s1", speaker="a", text="x y"
    )


def analysis(vector: np.ndarray | None) -> TurnAnalysis:
    return TurnAnalysis(
        remember=vector is not None,
        kind="fact",
        region="semantic",
        base_importance=0.7,
        reason="rules",
        content="x y",
        search_text="a: x y",
        triplet=Triplet(subject="a", attribute="b", value="c"),
        entities=["X"],
        vector_b64=None if vector is None else encode_vector(vector),
    )


def test_vectors_survive_base64_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    for vector in [AWKWARD, rng.standard_normal(384).astype(np.float32), np.zeros(0, np.float32)]:
        decoded = decode_vector(encode_vector(vector))

        assert decoded.dtype == np.float32
        assert decoded.tobytes() == vector.tobytes()


def test_a_vector_is_stored_as_little_endian_float32() -> None:
    text = encode_vector(np.array([1.0, -2.0], dtype=np.float64))

    assert base64.b64decode(text) == np.array([1.0, -2.0], dtype="<f4").tobytes()
    assert decode_vector(text).tolist() == [1.0, -2.0]


def test_a_prepared_turn_round_trips_with_its_vector_exact() -> None:
    prepared = EventPrepared(source=SOURCE, models=MODELS, event=turn(), analysis=analysis(AWKWARD))

    decoded = decode_prepared(encode(prepared))

    assert decoded == prepared
    assert isinstance(decoded.event, TurnRecorded)
    assert decoded.analysis is not None
    assert decoded.analysis.vector().tobytes() == AWKWARD.tobytes()
    assert decoded.namespace == "acme"
    assert decoded.query_vector() is None


def test_a_command_with_a_query_round_trips_with_its_query_vector() -> None:
    command = CommandIssued(
        event_id="c1", namespace="acme", event_time=T0, command="forget", query="forget x"
    )
    prepared = EventPrepared(
        source=SOURCE, models=MODELS, event=command, query_vector_b64=encode_vector(AWKWARD)
    )

    decoded = decode_prepared(encode(prepared))

    assert decoded == prepared
    assert isinstance(decoded.event, CommandIssued)
    query_vector = decoded.query_vector()
    assert query_vector is not None and query_vector.tobytes() == AWKWARD.tobytes()


def test_a_signal_and_a_rejected_marker_round_trip() -> None:
    signal = MemoriesRecalled(
        event_id="r1",
        namespace="acme",
        event_time=T0,
        hits=[RecallHit(memory_id="m_1", rank=0, score=0.5)],
    )
    marker = EventPrepared(
        source=SOURCE,
        models=MODELS,
        rejected=Rejected(stage="validate", reason="bad", field="text"),
    )

    for prepared in (EventPrepared(source=SOURCE, models=MODELS, event=signal), marker):
        assert decode_prepared(encode(prepared)) == prepared
    assert decode_prepared(encode(marker)).namespace is None


def test_the_event_is_told_apart_by_its_event_type() -> None:
    prepared = EventPrepared(source=SOURCE, models=MODELS, event=turn(), analysis=analysis(None))
    payload = orjson.loads(encode(prepared))
    payload["event"]["event_type"] = "CommandIssued"

    with pytest.raises(InvalidEvent) as caught:
        decode_prepared(orjson.dumps(payload))

    assert caught.value.field is not None and caught.value.field.startswith("event.")


def test_an_unremembered_turn_has_no_vector_to_give() -> None:
    with pytest.raises(ValueError, match="not remembered"):
        analysis(None).vector()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schema_version": 7}, "schema_version"),
        ({"source": {"topic": "t", "partition": 0, "offset": -1}}, "source.offset"),
        ({"models": {"classifier": "rules-v1"}}, "models.encoder"),
        ({"event_type": "TurnRecorded"}, "event_type"),
    ],
)
def test_a_bad_prepared_message_names_the_field(change: dict[str, object], field: str) -> None:
    prepared = EventPrepared(source=SOURCE, models=MODELS, event=turn(), analysis=analysis(None))
    payload = orjson.loads(encode(prepared)) | change

    with pytest.raises(InvalidEvent) as caught:
        decode_prepared(orjson.dumps(payload))

    assert caught.value.field == field


def test_the_prepared_json_holds_no_float_lists() -> None:
    prepared = EventPrepared(source=SOURCE, models=MODELS, event=turn(), analysis=analysis(AWKWARD))

    payload = orjson.loads(encode(prepared))

    assert isinstance(payload["analysis"]["vector_b64"], str)
    assert payload["schema_version"] == 1 and payload["event_type"] == "EventPrepared"
