"""Contract tests for the Milvus view (STYLE #4): one suite, run against every backend.

``TestMilvusLiteView`` uses a real Milvus Lite file under ``tmp_path``;
``TestMilvusLiteServerView`` the same file served by a Milvus Lite server process over http. Set
``HINDSIGHT_TEST_MILVUS_URI=http://host:19530`` to run the same suite against Milvus standalone
(``TestMilvusStandaloneView``), each test in its own collection, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from infra.milvus_lite import LocalMilvusLite
from pipeline.views.milvus import MilvusView, MilvusViewError, watermark_key
from schemas.memory import (
    Association,
    HistoryEntry,
    MemoryRecord,
    SourceTurn,
    Status,
    Triplet,
)

pytestmark = pytest.mark.integration

DIM = 8
T0 = datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
ViewFactory = Callable[[], MilvusView]


def unit(rng: np.random.Generator, dim: int = DIM) -> list[float]:
    vector = rng.standard_normal(dim).astype(np.float32)
    return [float(x) for x in vector / np.linalg.norm(vector)]


def make_record(
    memory_id: str,
    namespace: str,
    vector: list[float],
    status: Status = "active",
    **changes: Any,
) -> MemoryRecord:
    fields: dict[str, Any] = {
        "id": memory_id,
        "namespace": namespace,
        "region": "semantic",
        "kind": "fact",
        "content": f"content of {memory_id}",
        "search_text": f"user: content of {memory_id}",
        "base_importance": 0.7,
        "importance": 0.7,
        "created_at": T0,
        "valid_from": T0,
        "updated_at": T0,
        "status": status,
        "segment_id": "seg-1",
        "activation": 0.5,
        "activation_at": T0,
        "vector": vector,
    }
    fields.update(changes)
    return MemoryRecord(**fields)


def rich_record(rng: np.random.Generator) -> MemoryRecord:
    """Every optional part filled in, so the round trip covers the whole model."""
    turn = SourceTurn(
        event_id="evt-1",
        session_id="s-1",
        speaker="user",
        event_time=T0,
        dialogue_id="d-9",
    )
    return make_record(
        "m-rich",
        "ns-rich",
        unit(rng),
        status="superseded",
        region="episodic",
        kind="preference",
        # Multi-byte text past the 4096-byte content column: the record JSON keeps it whole.
        content="我喜欢在周末喝乌龙茶。" * 200 + ' "quoted" \\ end',
        entities=["乌龙茶", "weekend"],
        triplet=Triplet(subject="user", attribute="drink", value="oolong"),
        base_importance=0.9,
        confirmations=2,
        importance=1.08,
        valid_to=T0 + timedelta(days=3, milliseconds=7),
        updated_at=T0 + timedelta(days=3),
        pinned=True,
        superseded_by="m-newer",
        associations=[Association(memory_id="m-newer", relation="superseded_by", weight=0.88)],
        provenance=[turn],
        access_count=4,
        last_access=T0 + timedelta(hours=5),
        activation=0.123456789,
        history=[HistoryEntry(at=T0, change="created", cause_event_id="evt-1", detail="x")],
        origin_offset=41,
    )


def assert_same(actual: MemoryRecord, expected: MemoryRecord) -> None:
    # Vectors come back as float32; everything else must be exact.
    assert actual.model_dump(exclude={"vector"}) == expected.model_dump(exclude={"vector"})
    np.testing.assert_allclose(actual.vector, expected.vector, rtol=1e-6, atol=1e-7)


class MilvusViewContract:
    """The behaviour every Milvus backend must show; subclasses provide ``make_view``."""

    @pytest.fixture
    def make_view(self) -> ViewFactory:
        raise NotImplementedError

    @pytest.fixture
    def view(self, make_view: ViewFactory) -> MilvusView:
        return make_view()

    @pytest.fixture
    def rng(self) -> np.random.Generator:
        return np.random.default_rng(7)

    def test_round_trip_is_exact(self, view: MilvusView, rng: np.random.Generator) -> None:
        rich = rich_record(rng)
        plain = make_record("m-plain", "ns-rich", unit(rng))
        view.upsert([rich, plain])
        view.flush()

        got = view.get(["m-plain", "missing", "m-rich"])
        assert [record.id for record in got] == ["m-plain", "m-rich"]
        assert_same(got[0], plain)
        assert_same(got[1], rich)
        loaded = {record.id: record for record in view.load_namespace("ns-rich")}
        assert_same(loaded["m-rich"], rich)

    def test_upsert_is_idempotent_and_last_write_wins(
        self, view: MilvusView, rng: np.random.Generator
    ) -> None:
        first = make_record("m-1", "ns", unit(rng))
        view.upsert([first])
        view.upsert([first])
        view.upsert([first, first])
        assert view.count() == 1

        changed = first.model_copy(update={"status": "cold", "activation": 0.01})
        view.upsert([changed])
        view.flush()
        assert view.count() == 1
        assert view.count("ns", "cold") == 1
        assert_same(view.get(["m-1"])[0], changed)

        # Within one call the later occurrence is the one kept (log order).
        view.upsert([first, changed])
        assert view.get(["m-1"])[0].status == "cold"

    def test_namespaces_are_isolated(self, view: MilvusView, rng: np.random.Generator) -> None:
        shared = unit(rng)
        hostile = 'x" or namespace != "'  # must stay a literal inside the filter
        records = [
            make_record("a-1", "alice", shared),
            make_record("a-2", "alice", unit(rng)),
            make_record("b-1", "bob", shared),
            make_record("h-1", hostile, unit(rng)),
        ]
        view.upsert(records)
        view.flush()

        assert {r.id for r in view.load_namespace("alice")} == {"a-1", "a-2"}
        assert {r.id for r in view.load_namespace("bob")} == {"b-1"}
        assert {r.id for r in view.load_namespace(hostile)} == {"h-1"}
        assert view.load_namespace("carol") == []
        assert view.count("alice") == 2
        assert view.count(hostile) == 1
        assert view.namespaces() == sorted(["alice", "bob", hostile])

        hits = view.dense_search("bob", shared, k=10)
        assert [memory_id for memory_id, _ in hits] == ["b-1"]
        assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
        assert {i for i, _ in view.dense_search(hostile, shared, k=10)} == {"h-1"}
        assert view.dense_search("carol", shared, k=10) == []
        # get() scoped to a namespace drops another namespace's ids.
        assert [r.id for r in view.get(["a-1", "b-1"], namespace="bob")] == ["b-1"]

    def test_status_filter(self, view: MilvusView, rng: np.random.Generator) -> None:
        query = unit(rng)
        statuses: list[Status] = ["active", "superseded", "cold", "forgotten"]
        view.upsert(
            [make_record(f"m-{s}", "ns", query, status=s) for s in statuses]
            + [make_record("m-active-2", "ns", unit(rng))]
        )
        view.flush()

        assert view.count("ns") == 5
        assert view.count("ns", "active") == 2
        assert view.count(status="cold") == 1
        assert {i for i, _ in view.dense_search("ns", query, k=10)} == {"m-active", "m-active-2"}
        found = view.dense_search("ns", query, k=10, statuses=("cold", "superseded"))
        assert {i for i, _ in found} == {"m-cold", "m-superseded"}
        assert view.dense_search("ns", query, k=10, statuses=()) == []
        assert len(view.load_namespace("ns")) == 5  # all statuses

    def test_delete_is_gone(self, view: MilvusView, rng: np.random.Generator) -> None:
        vector = unit(rng)
        view.upsert([make_record("m-1", "ns", vector), make_record("m-2", "ns", unit(rng))])
        view.flush()
        view.delete(["m-1", "m-1", "never-existed"])
        view.flush()

        assert view.get(["m-1"]) == []
        assert [r.id for r in view.load_namespace("ns")] == ["m-2"]
        assert view.count("ns") == 1
        assert "m-1" not in {i for i, _ in view.dense_search("ns", vector, k=10)}

    def test_purge_keeps_every_live_row_exactly(
        self, view: MilvusView, rng: np.random.Generator
    ) -> None:
        kept = [rich_record(rng), make_record("m-2", "ns", unit(rng))]
        view.upsert([*kept, make_record("m-1", "ns", unit(rng))])
        view.set_watermarks({"t:0": 5})
        view.flush()
        view.delete(["m-1"])
        view.flush()
        view.purge()

        assert view.count() == 2 and view.get(["m-1"]) == []
        for record in kept:
            [back] = view.get([record.id])
            assert_same(back, record)
        assert view.watermarks() == {"t:0": 5}
        assert [i for i, _ in view.dense_search("ns", kept[1].vector, k=1)] == ["m-2"]

    def test_watermarks_persist_and_only_move_forward(self, make_view: ViewFactory) -> None:
        turns0 = watermark_key("hindsight.turns.v1", 0)
        turns1 = watermark_key("hindsight.turns.v1", 1)
        first = make_view()
        assert first.watermarks() == {}
        first.set_watermarks({turns0: 10, turns1: 3})
        first.set_watermarks({turns0: 12})
        first.set_watermarks({turns1: 2})  # a redelivered older batch must not move it back
        first.set_watermarks({})
        assert first.watermarks() == {turns0: 12, turns1: 3}
        first.flush()
        first.close()
        first.close()  # idempotent
        with pytest.raises(MilvusViewError):
            first.watermarks()

        reopened = make_view()
        assert reopened.watermarks() == {turns0: 12, turns1: 3}

    def test_load_namespace_pages_past_one_batch(self, view: MilvusView) -> None:
        rng = np.random.default_rng(11)
        vectors = rng.standard_normal((2500, DIM)).astype(np.float32)
        records = [make_record(f"m-{i:05d}", "big", vectors[i].tolist()) for i in range(2500)]
        view.upsert([*records, make_record("other-1", "small", vectors[0].tolist())])
        view.flush()

        loaded = view.load_namespace("big")
        assert len(loaded) == 2500
        assert {r.id for r in loaded} == {r.id for r in records}
        by_id = {r.id: r for r in loaded}
        np.testing.assert_allclose(by_id["m-02499"].vector, vectors[2499], rtol=1e-6)

    def test_dense_search_matches_brute_force(self, view: MilvusView) -> None:
        rng = np.random.default_rng(5)
        vectors = rng.standard_normal((300, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        statuses: list[Status] = ["active", "active", "cold"]
        records = [
            make_record(f"m-{i:03d}", "ns", vectors[i].tolist(), status=statuses[i % 3])
            for i in range(300)
        ]
        view.upsert(records)
        view.flush()
        active = np.array([i % 3 != 2 for i in range(300)])

        for _ in range(5):
            query = rng.standard_normal(DIM).astype(np.float32)
            sims = vectors @ (query / np.linalg.norm(query))
            sims[~active] = -np.inf
            expected = [f"m-{i:03d}" for i in np.argsort(-sims)[:10]]

            hits = view.dense_search("ns", query.tolist(), k=10)
            assert [memory_id for memory_id, _ in hits] == expected
            scores = [score for _, score in hits]
            assert scores == sorted(scores, reverse=True)
            np.testing.assert_allclose(scores, np.sort(sims)[::-1][:10], atol=1e-5)

    def test_rejects_wrong_dimension(self, view: MilvusView, rng: np.random.Generator) -> None:
        with pytest.raises(MilvusViewError, match="m-bad"):
            view.upsert([make_record("m-bad", "ns", unit(rng, DIM + 1))])
        with pytest.raises(MilvusViewError, match="dimensions"):
            view.dense_search("ns", [1.0, 0.0], k=3)

    def test_rejects_oversized_record(self, view: MilvusView, rng: np.random.Generator) -> None:
        history = [
            HistoryEntry(at=T0, change="reinforced", cause_event_id=f"evt-{i}", detail="x" * 100)
            for i in range(600)
        ]
        with pytest.raises(MilvusViewError, match="m-huge"):
            view.upsert([make_record("m-huge", "ns", unit(rng), history=history)])
        assert view.count() == 0


class TestMilvusLiteView(MilvusViewContract):
    @pytest.fixture
    def make_view(self, tmp_path: Path) -> Iterator[ViewFactory]:
        opened: list[MilvusView] = []
        uri = str(tmp_path / "nested" / "dir" / "hindsight.db")  # parents are created

        def factory() -> MilvusView:
            view = MilvusView(uri, dimension=DIM)
            view.ensure()
            opened.append(view)
            return view

        yield factory
        for view in opened:
            view.close()

    def test_ensure_is_idempotent_and_checks_dimension(self, tmp_path: Path) -> None:
        uri = str(tmp_path / "v.db")
        with MilvusView(uri, dimension=DIM) as view:
            view.ensure()
            view.ensure()
        with MilvusView(uri, dimension=DIM + 1) as other, pytest.raises(MilvusViewError):
            other.ensure()

    def test_drop_removes_everything(self, tmp_path: Path) -> None:
        with MilvusView(str(tmp_path / "v.db"), dimension=DIM) as view:
            view.ensure()
            view.upsert([make_record("m-1", "ns", [1.0] + [0.0] * (DIM - 1))])
            view.set_watermarks({"t:0": 1})
            view.drop()
            view.ensure()
            assert view.count() == 0
            assert view.watermarks() == {}

    def test_a_purge_takes_deleted_rows_out_of_the_files(self, tmp_path: Path) -> None:
        """Lite keeps a deleted row in its segment and index files after a flush; purge does not."""
        marker = f"zq-{uuid.uuid4().hex}"
        vector = [1.0, 0.5, 0.25] + [0.0] * (DIM - 3)
        pattern = np.asarray(vector, dtype="<f4").tobytes()

        def files_hold(needle: bytes) -> bool:
            return any(needle in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())

        with MilvusView(str(tmp_path / "v.db"), dimension=DIM) as view:
            view.ensure()
            view.upsert(
                [
                    make_record("m-1", "ns", vector, content=marker),
                    make_record("m-2", "ns", [0.0] * (DIM - 1) + [1.0]),
                ]
            )
            view.flush()
            view.delete(["m-1"])
            view.flush()
            assert files_hold(marker.encode()) and files_hold(pattern), "a flush is not enough"
            view.purge()
            assert not files_hold(marker.encode()) and not files_hold(pattern)
            assert [r.id for r in view.load_namespace("ns")] == ["m-2"]
        with MilvusView(str(tmp_path / "v.db"), dimension=DIM) as again:
            again.ensure()
            assert again.count() == 1

    def test_a_purge_cut_short_is_finished_on_the_next_ensure(self, tmp_path: Path) -> None:
        uri = str(tmp_path / "v.db")
        with MilvusView(uri, dimension=DIM) as view:
            view.ensure()
            view.upsert([make_record("m-1", "ns", [1.0] + [0.0] * (DIM - 1))])
            view.flush()
            client = view._require()
            # A crash after the copy was made and the original dropped, before the rename.
            staging = view.collection + "__purge"
            view._create(client, staging, view._memory_schema(client))
            client.create_index(staging, view._memory_indexes(client), sync=False)
            client.insert(staging, data=list(view._iterate("", ["*"])))
            client.flush(staging)
            client.drop_collection(view.collection)
        with MilvusView(uri, dimension=DIM) as reopened:
            reopened.ensure()
            assert [r.id for r in reopened.load_namespace("ns")] == ["m-1"]
            assert not reopened._require().has_collection(staging)

    def test_rejects_a_path_that_is_not_lite(self, tmp_path: Path) -> None:
        with pytest.raises(MilvusViewError, match=r"\.db"):
            MilvusView(str(tmp_path / "milvus"), dimension=DIM)


STANDALONE_URI = os.environ.get("HINDSIGHT_TEST_MILVUS_URI", "")


@pytest.mark.skipif(not STANDALONE_URI, reason="set HINDSIGHT_TEST_MILVUS_URI to a Milvus server")
class TestMilvusStandaloneView(MilvusViewContract):
    @pytest.fixture
    def make_view(self) -> Iterator[ViewFactory]:
        opened: list[MilvusView] = []
        collection = f"hindsight_test_{uuid.uuid4().hex[:12]}"

        def factory() -> MilvusView:
            view = MilvusView(STANDALONE_URI, dimension=DIM, collection=collection)
            view.ensure()
            opened.append(view)
            return view

        yield factory
        cleaner = MilvusView(STANDALONE_URI, dimension=DIM, collection=collection)
        cleaner.drop()
        cleaner.close()
        for view in opened:
            view.close()


class TestMilvusLiteServerView(MilvusViewContract):
    """The same contract over http to a Milvus Lite server process (what the embedded stack
    runs beside the worker), and its purge still leaves no deleted row in the files."""

    @pytest.fixture
    def server(self, tmp_path: Path) -> Iterator[LocalMilvusLite]:
        served = LocalMilvusLite(tmp_path / "milvus" / "hindsight.db")
        served.start()
        yield served
        served.stop()

    @pytest.fixture
    def make_view(self, server: LocalMilvusLite) -> Iterator[ViewFactory]:
        opened: list[MilvusView] = []

        def factory() -> MilvusView:
            view = MilvusView(server.uri, dimension=DIM)
            view.ensure()
            opened.append(view)
            return view

        yield factory
        for view in opened:
            view.close()

    def test_a_purge_over_http_takes_deleted_rows_out_of_the_files(
        self, server: LocalMilvusLite, tmp_path: Path
    ) -> None:
        marker = f"zq-{uuid.uuid4().hex}"

        def files_hold(needle: bytes) -> bool:
            return any(needle in p.read_bytes() for p in server.data_dir.rglob("*") if p.is_file())

        with MilvusView(server.uri, dimension=DIM) as view:
            view.ensure()
            view.upsert(
                [
                    make_record("m-1", "ns", [1.0] + [0.0] * (DIM - 1), content=marker),
                    make_record("m-2", "ns", [0.0] * (DIM - 1) + [1.0]),
                ]
            )
            view.flush()
            view.delete(["m-1"])
            view.flush()
            assert files_hold(marker.encode()), "a flush is not enough"
            view.purge()
            assert not files_hold(marker.encode())
            assert [r.id for r in view.load_namespace("ns")] == ["m-2"]
        server.stop()
        # The files are the in-process layout: the path opens directly once the server is gone.
        with MilvusView(str(server.data_dir), dimension=DIM) as direct:
            direct.ensure()
            assert [r.id for r in direct.load_namespace("ns")] == ["m-2"]
