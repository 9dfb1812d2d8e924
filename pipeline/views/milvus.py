"""The Milvus view: memory records materialised for filtered vector search (a derived view, I1).

One adapter for both deployments (I9): a ``*.db`` path opens Milvus Lite in-process, an
``http(s)://host:19530`` URI talks to Milvus standalone/distributed. Only MilvusClient calls that
both implement are used (no expression templates, no server-side distinct, no group-by).

Two collections:

``<collection>``
    One row per memory id. Scalar columns exist for filters only; the ``record`` JSON column is the
    full ``MemoryRecord`` (minus its vector, which lives in ``vector``) and is what rows are rebuilt
    from, so the view round-trips exactly.
``<collection>_watermarks``
    ``"<topic>:<partition>" -> offset``: the input position this view has applied (I4, I5). Milvus
    insists on a vector field, so rows carry a 2-d dummy vector.

Vector index — FLAT with COSINE.
    Measured on Milvus Lite 3.2.2 (10k rows, 384-d, 10 namespaces, filter on namespace + status,
    top-10, median of 30 queries after flush): FLAT 18.8 ms recall 1.00, HNSW(M=16, ef=64) 20.6 ms
    recall 1.00, IVF_FLAT(nlist=64, nprobe=8) 24.4 ms recall 0.43 (IVF and a selective namespace
    filter do not mix). Filters are always namespace-selective, so exact FLAT costs no more than
    HNSW here and gives the classic-RAG baseline exact answers; pass ``index_type="HNSW"`` for a
    big standalone deployment. COSINE rather than IP because merged or averaged vectors need not
    be unit length, and the duplicate/link thresholds (0.92 / 0.85) are defined as cosine.

Freshness: searches over unflushed rows are slow in Milvus Lite (~600 ms vs ~19 ms at 10k rows),
so writers should call :meth:`MilvusView.flush` after each batch.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pymilvus import DataType, MilvusClient, MilvusException

from pipeline.views.milvus_uri import is_lite_uri
from schemas.errors import HindsightError
from schemas.memory import MemoryRecord

DEFAULT_COLLECTION = "hindsight_memories"
WATERMARK_SUFFIX = "_watermarks"
PURGE_SUFFIX = "__purge"  # a Lite collection being rebuilt without its deleted rows
OPEN_VALID_TO = -1  # valid_to sentinel for "still valid" (INT64 columns cannot be null everywhere)

ID_MAX_BYTES = 64
NAMESPACE_MAX_BYTES = 256
LABEL_MAX_BYTES = 32  # region, kind, status
CONTENT_MAX_BYTES = 4096  # Milvus counts VARCHAR max_length in bytes; the full text is in `record`
WATERMARK_KEY_MAX_BYTES = 512
RECORD_MAX_BYTES = 65_536  # standalone's default JSON field limit; Lite has none, so check here

# Rows per request: keeps gRPC messages well under the 64 MiB default and `id in [...]` filters
# short; 1000 is also under standalone's 16384 query-window limit.
WRITE_BATCH = 500
READ_BATCH = 1000
MAX_TOP_K = 16384  # standalone's topk ceiling

IndexType = Literal["FLAT", "HNSW"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_DUMMY_DIM = 2

# Milvus Lite allows one open per data dir per process; views on the same file share its server.
LITE_SERVER_VERSION_PREFIX = "milvus_lite"  # what a Milvus Lite server answers GetVersion with
_lite_users: Counter[str] = Counter()
_lite_lock = threading.Lock()


class _LiteIteratorNoise(logging.Filter):
    """Drop the one warning Milvus Lite provokes on every paged read: it keeps no MVCC timestamps,
    so pymilvus falls back to a client-side one, which is what we want there anyway."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("failed to get mvccTs")


_lite_noise_filter = _LiteIteratorNoise()


class MilvusViewError(HindsightError):
    """A Milvus view operation failed; the message names the collection, field or memory id."""


def watermark_key(topic: str, partition: int) -> str:
    """The one spelling of a watermark key, shared by the worker and recall."""
    return f"{topic}:{partition}"


class MilvusView:
    """Memory records in Milvus, keyed by memory id; upserts are idempotent (I4).

    The writer (the worker) upserts records first and calls :meth:`set_watermarks` after them, so a
    crash between the two replays a batch whose upserts are already there: harmless, because
    upserts overwrite by id. Watermarks only move forward.
    """

    def __init__(
        self,
        uri: str,
        dimension: int,
        collection: str = DEFAULT_COLLECTION,
        *,
        index_type: IndexType = "FLAT",
    ) -> None:
        if dimension <= 0:
            raise MilvusViewError(f"dimension must be positive, got {dimension}")
        self.uri = uri
        self.dimension = dimension
        self.collection = collection
        self.watermark_collection = collection + WATERMARK_SUFFIX
        self.index_type = index_type
        self._lite_path: str | None = None
        if is_lite_uri(uri):
            if not uri.endswith(".db"):
                raise MilvusViewError(
                    f"milvus uri {uri!r}: expected a Milvus Lite path ending in .db or http(s)://"
                )
            path = Path(uri).expanduser().resolve()
            path.parent.mkdir(parents=True, exist_ok=True)
            self._lite_path = str(path)
            with _lite_lock:
                _lite_users[self._lite_path] += 1
            # Adding the same filter object twice is a no-op in logging.
            logging.getLogger("pymilvus.client.iterator.query_iterator").addFilter(
                _lite_noise_filter
            )
            uri = self._lite_path
        try:
            # Lite: a dedicated channel, closed with the view, since close() stops the server too.
            self._client: MilvusClient | None = MilvusClient(
                uri=uri, dedicated=self._lite_path is not None
            )
        except MilvusException as error:
            hint = " (only one process may open a Milvus Lite file)" if self._lite_path else ""
            self._release_lite()
            raise MilvusViewError(f"cannot open Milvus at {self.uri!r}{hint}: {error}") from error
        # The Lite engine, opened in-process or served by its own process (infra/milvus_lite.py),
        # keeps deleted rows in its files whatever the transport: ``purge`` must copy and swap.
        self._lite_engine = self._lite_path is not None or self._served_by_lite()

    def _served_by_lite(self) -> bool:
        client = self._require()
        with self._calling("get_server_version", self.collection):
            return str(client.get_server_version()).startswith(LITE_SERVER_VERSION_PREFIX)

    # ── lifecycle ──────────────────────────────────────────────────────────────

    def ensure(self) -> None:
        """Create both collections if missing (idempotent) and load them for search."""
        client = self._require()
        with self._calling("ensure", self.collection):
            self._finish_purge(client)
            if client.has_collection(self.collection):
                self._check_dimension(client)
            else:
                self._create(client, self.collection, self._memory_schema(client))
                client.create_index(self.collection, self._memory_indexes(client), sync=False)
            if not client.has_collection(self.watermark_collection):
                self._create(client, self.watermark_collection, self._watermark_schema(client))
                client.create_index(
                    self.watermark_collection, self._watermark_indexes(client), sync=False
                )
            # A restarted standalone server may have released them; loading twice is a no-op.
            client.load_collection(self.collection)
            client.load_collection(self.watermark_collection)

    def flush(self) -> None:
        """Seal buffered writes into segments: fast to search, and deletes compacted away."""
        client = self._require()
        with self._calling("flush", self.collection):
            client.flush(self.collection)
            client.flush(self.watermark_collection)

    def close(self) -> None:
        """Release the connection (and the Lite file when this was its last view). Idempotent."""
        if self._client is None:
            return
        client, self._client = self._client, None
        try:
            client.close()
        finally:
            self._release_lite()

    def drop(self) -> None:
        """Delete both collections: the view is derived, a replay rebuilds it (I1)."""
        client = self._require()
        with self._calling("drop", self.collection):
            for name in (self.collection, self.watermark_collection):
                if client.has_collection(name):
                    client.drop_collection(name)

    def __enter__(self) -> MilvusView:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ── writes ─────────────────────────────────────────────────────────────────

    def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Write records keyed by id; writing the same record again changes nothing (I4).

        If one call carries an id twice, the later record wins (log order).
        """
        latest: dict[str, MemoryRecord] = {}
        for record in records:
            latest.pop(record.id, None)  # keep the last occurrence's position as well
            latest[record.id] = record
        rows = [self._to_row(record) for record in latest.values()]
        client = self._require()
        for chunk in _chunks(rows, WRITE_BATCH):
            with self._calling("upsert", self.collection, f"{len(chunk)} rows"):
                client.upsert(self.collection, data=chunk)

    def delete(self, ids: Iterable[str]) -> None:
        """Hard erase by id: the rows stop being readable through Milvus at once.

        Milvus deletes are tombstones: the bytes stay in the segment files until they are
        rewritten, so a hard erase is followed by :meth:`purge`.
        """
        unique = list(dict.fromkeys(ids))
        client = self._require()
        for chunk in _chunks(unique, READ_BATCH):
            with self._calling("delete", self.collection, f"{len(chunk)} ids"):
                client.delete(self.collection, ids=chunk)

    def purge(self) -> None:
        """Take deleted rows out of the files too (a hard erase leaves nothing readable, I8).

        Measured on Milvus Lite 3.2.2: after a delete and a flush the row is still in its
        parquet segment and in the vector index file — the delete only adds a tombstone file,
        ``compact()`` is accepted but does nothing, and Lite merges files only once four of a
        size pile up. So on a Lite file the live rows are copied into a fresh collection, the old
        one is dropped (its directory deleted) and the copy renamed into place (also when a Lite
        server process serves the file over http): O(rows) — measured
        3 s for 1k rows and 18 s for 10k (preliminary, on a busy machine) — once per sink
        batch that erased something. A crash midway is finished by :meth:`ensure`. On a
        Milvus server ``compact()`` asks the server to rewrite the segments; it deletes the old
        objects after its own garbage-collection delay (docs/ERASURE.md).
        """
        client = self._require()
        if not self._lite_engine:
            with self._calling("compact", self.collection):
                client.compact(self.collection)
            return
        staging = self.collection + PURGE_SUFFIX
        with self._calling("purge", self.collection):
            if client.has_collection(staging):
                client.drop_collection(staging)
            self._create(client, staging, self._memory_schema(client))
            client.create_index(staging, self._memory_indexes(client), sync=False)
            page: list[dict[str, Any]] = []
            for row in self._iterate("", ["*"]):
                page.append(row)  # every column as stored: copied, not re-derived
                if len(page) >= WRITE_BATCH:
                    client.insert(staging, data=page)
                    page = []
            if page:
                client.insert(staging, data=page)
            client.flush(staging)
            client.drop_collection(self.collection)
            self._finish_purge(client)

    def _finish_purge(self, client: MilvusClient) -> None:
        """A complete copy whose original was dropped takes its name; a partial one is dropped."""
        staging = self.collection + PURGE_SUFFIX
        if not client.has_collection(staging):
            return
        if client.has_collection(self.collection):
            client.drop_collection(staging)  # the copy never finished: the original still holds
        else:
            client.rename_collection(staging, self.collection)
            client.load_collection(self.collection)

    def set_watermarks(self, offsets: dict[str, int]) -> None:
        """Record applied input offsets (``watermark_key(topic, partition) -> offset``).

        Call after the records of the batch are upserted. Monotonic: an offset lower than the
        stored one is ignored, so a redelivered older batch cannot move freshness backwards.
        """
        if not offsets:
            return
        for key in offsets:
            if not key or len(key.encode()) > WATERMARK_KEY_MAX_BYTES:
                raise MilvusViewError(f"watermark key {key!r}: empty or too long")
        current = self._read_watermarks(list(offsets))
        rows = [
            {"key": key, "offset": int(offset), "dummy": [0.0] * _DUMMY_DIM}
            for key, offset in offsets.items()
            if int(offset) > current.get(key, -1)
        ]
        if not rows:
            return
        client = self._require()
        with self._calling("set_watermarks", self.watermark_collection):
            client.upsert(self.watermark_collection, data=rows)

    # ── reads ──────────────────────────────────────────────────────────────────

    def get(self, ids: Iterable[str], namespace: str | None = None) -> list[MemoryRecord]:
        """Records (with vectors) for the ids that exist, in the order asked.

        With ``namespace``, rows of any other namespace are left out (I8).
        """
        unique = list(dict.fromkeys(ids))
        client = self._require()
        found: dict[str, MemoryRecord] = {}
        for chunk in _chunks(unique, READ_BATCH):
            with self._calling("get", self.collection, f"{len(chunk)} ids"):
                rows = client.get(self.collection, ids=chunk, output_fields=["record", "vector"])
            for row in rows:
                record = self._from_row(row)
                if namespace is None or record.namespace == namespace:
                    found[record.id] = record
        return [found[memory_id] for memory_id in unique if memory_id in found]

    def load_namespace(self, namespace: str) -> list[MemoryRecord]:
        """Every record of a namespace, all statuses, with vectors (paged, any size)."""
        return [
            self._from_row(row)
            for row in self._iterate(_eq("namespace", namespace), ["record", "vector"])
        ]

    def namespaces(self) -> list[str]:
        """Distinct namespaces, sorted; scans the namespace column (admin tools, not hot paths)."""
        seen = {str(row["namespace"]) for row in self._iterate("", ["namespace"])}
        return sorted(seen)

    def count(self, namespace: str | None = None, status: str | None = None) -> int:
        clauses = []
        if namespace is not None:
            clauses.append(_eq("namespace", namespace))
        if status is not None:
            clauses.append(_eq("status", status))
        client = self._require()
        with self._calling("count", self.collection):
            rows = client.query(
                self.collection, filter=" and ".join(clauses), output_fields=["count(*)"]
            )
        return int(rows[0]["count(*)"]) if rows else 0

    def dense_search(
        self,
        namespace: str,
        vector: Sequence[float],
        k: int,
        statuses: Sequence[str] = ("active",),
    ) -> list[tuple[str, float]]:
        """Top-k ``(memory id, cosine similarity)`` within one namespace, best first.

        The classic-RAG baseline: one filtered vector search, no fusion, no reranking.
        """
        if k <= 0 or not statuses:
            return []
        if k > MAX_TOP_K:
            raise MilvusViewError(f"dense_search k={k}: at most {MAX_TOP_K}")
        query = self._vector(vector, f"dense_search query in namespace {namespace!r}")
        expr = f"{_eq('namespace', namespace)} and status in [{', '.join(map(_quote, statuses))}]"
        client = self._require()
        with self._calling("dense_search", self.collection, f"namespace {namespace!r}"):
            results = client.search(
                self.collection,
                data=[query],
                anns_field="vector",
                limit=k,
                filter=expr,
                output_fields=["id"],
                search_params={"metric_type": "COSINE", "params": {"ef": max(64, k)}},
            )
        hits = [(str(hit["id"]), float(hit["distance"])) for hit in results[0]]
        # COSINE "distance" is a similarity in Milvus: larger is closer.
        hits.sort(key=lambda hit: -hit[1])
        return hits

    def watermarks(self) -> dict[str, int]:
        """Applied input offsets by ``"<topic>:<partition>"`` (I5)."""
        return self._read_watermarks(None)

    # ── rows ───────────────────────────────────────────────────────────────────

    def _to_row(self, record: MemoryRecord) -> dict[str, Any]:
        where = f"memory {record.id!r} in namespace {record.namespace!r}"
        _check_bytes("id", record.id, ID_MAX_BYTES, where)
        _check_bytes("namespace", record.namespace, NAMESPACE_MAX_BYTES, where)
        for name in ("region", "kind", "status"):
            _check_bytes(name, getattr(record, name), LABEL_MAX_BYTES, where)
        dump = record.model_dump(mode="json", exclude={"vector"})
        size = len(record.model_dump_json(exclude={"vector"}))
        if size > RECORD_MAX_BYTES:
            # Fail the same way on both engines instead of only on standalone.
            raise MilvusViewError(
                f"{where}: record JSON is {size} bytes, over {RECORD_MAX_BYTES} (cap history?)"
            )
        return {
            "id": record.id,
            "namespace": record.namespace,
            "region": record.region,
            "kind": record.kind,
            "status": record.status,
            "importance": float(record.importance),
            "activation": float(record.activation),
            "created_at": _epoch_ms(record.created_at),
            "valid_from": _epoch_ms(record.valid_from),
            "updated_at": _epoch_ms(record.updated_at),
            "valid_to": OPEN_VALID_TO if record.valid_to is None else _epoch_ms(record.valid_to),
            "content": _clip_utf8(record.content, CONTENT_MAX_BYTES),
            "entities": list(record.entities),
            # The vector has its own column; storing it twice would double the row size.
            "record": dump,
            "vector": self._vector(record.vector, where),
        }

    @staticmethod
    def _from_row(row: dict[str, Any]) -> MemoryRecord:
        payload = dict(row["record"])
        payload["vector"] = [float(x) for x in row["vector"]]
        return MemoryRecord.model_validate(payload)

    def _vector(self, vector: Sequence[float], where: str) -> list[float]:
        if len(vector) != self.dimension:
            raise MilvusViewError(
                f"{where}: vector has {len(vector)} dimensions, the view expects {self.dimension}"
            )
        return [float(x) for x in vector]

    # ── schema ─────────────────────────────────────────────────────────────────

    def _memory_schema(self, client: MilvusClient) -> Any:
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=ID_MAX_BYTES)
        # Partition key: namespace-filtered searches only touch that namespace's partition.
        schema.add_field(
            "namespace", DataType.VARCHAR, max_length=NAMESPACE_MAX_BYTES, is_partition_key=True
        )
        for name in ("region", "kind", "status"):
            schema.add_field(name, DataType.VARCHAR, max_length=LABEL_MAX_BYTES)
        schema.add_field("importance", DataType.FLOAT)
        schema.add_field("activation", DataType.FLOAT)
        for name in ("created_at", "valid_from", "updated_at", "valid_to"):
            schema.add_field(name, DataType.INT64)
        schema.add_field("content", DataType.VARCHAR, max_length=CONTENT_MAX_BYTES)
        # JSON, not ARRAY: no per-row capacity to outgrow; json_contains works on both engines.
        schema.add_field("entities", DataType.JSON)
        schema.add_field("record", DataType.JSON)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=self.dimension)
        return schema

    def _memory_indexes(self, client: MilvusClient) -> Any:
        params = client.prepare_index_params()
        build = {"M": 16, "efConstruction": 200} if self.index_type == "HNSW" else {}
        params.add_index("vector", index_type=self.index_type, metric_type="COSINE", params=build)
        params.add_index("namespace", index_type="INVERTED")
        params.add_index("status", index_type="INVERTED")
        return params

    @staticmethod
    def _watermark_schema(client: MilvusClient) -> Any:
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field(
            "key", DataType.VARCHAR, is_primary=True, max_length=WATERMARK_KEY_MAX_BYTES
        )
        schema.add_field("offset", DataType.INT64)
        schema.add_field("dummy", DataType.FLOAT_VECTOR, dim=_DUMMY_DIM)
        return schema

    @staticmethod
    def _watermark_indexes(client: MilvusClient) -> Any:
        params = client.prepare_index_params()
        # L2, not COSINE: the dummy vector is all zeros, which has no direction.
        params.add_index("dummy", index_type="FLAT", metric_type="L2")
        return params

    @staticmethod
    def _create(client: MilvusClient, name: str, schema: Any) -> None:
        # Indexes are added separately with sync=False: pymilvus's sync wait sleeps 0.5 s per
        # index even when, as on a new empty collection, the build is already finished.
        client.create_collection(
            name,
            schema=schema,
            consistency_level="Strong",  # read-your-writes on standalone (I5)
        )

    def _check_dimension(self, client: MilvusClient) -> None:
        description = client.describe_collection(self.collection)
        for field in description.get("fields", []):
            if field.get("name") == "vector":
                existing = int(field.get("params", {}).get("dim", self.dimension))
                if existing != self.dimension:
                    raise MilvusViewError(
                        f"collection {self.collection!r} holds {existing}-d vectors, this view "
                        f"expects {self.dimension}: drop it and replay with the new encoder"
                    )

    # ── plumbing ───────────────────────────────────────────────────────────────

    def _iterate(self, expr: str, fields: list[str]) -> Iterator[dict[str, Any]]:
        # query_iterator pages by primary key on both engines, past standalone's 16384-row window.
        client = self._require()
        with self._calling("iterate", self.collection, expr or "all rows"):
            iterator = client.query_iterator(
                self.collection, batch_size=READ_BATCH, filter=expr, output_fields=fields
            )
            try:
                while page := iterator.next():
                    yield from page
            finally:
                iterator.close()

    def _read_watermarks(self, keys: list[str] | None) -> dict[str, int]:
        client = self._require()
        with self._calling("watermarks", self.watermark_collection):
            if keys is None:
                rows = client.query(
                    self.watermark_collection,
                    filter='key != ""',
                    output_fields=["key", "offset"],
                    limit=MAX_TOP_K,
                )
            else:
                rows = client.get(self.watermark_collection, ids=keys, output_fields=["offset"])
        return {str(row["key"]): int(row["offset"]) for row in rows}

    def _require(self) -> MilvusClient:
        if self._client is None:
            raise MilvusViewError(f"milvus view {self.collection!r} at {self.uri!r} is closed")
        return self._client

    def _release_lite(self) -> None:
        if self._lite_path is None:
            return
        path, self._lite_path = self._lite_path, None
        with _lite_lock:
            _lite_users[path] -= 1
            last = _lite_users[path] <= 0
            if last:
                del _lite_users[path]
        if last:
            # Stop the in-process server so the data dir is free for the next opener.
            from milvus_lite.server_manager import server_manager_instance

            server_manager_instance.release_server(path)

    @contextmanager
    def _calling(self, operation: str, collection: str, detail: str = "") -> Iterator[None]:
        try:
            yield
        except MilvusException as error:
            suffix = f" ({detail})" if detail else ""
            raise MilvusViewError(f"{operation} on {collection!r}{suffix}: {error}") from error


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _quote(value: str) -> str:
    # No expression templates in Lite, so escape into a literal both parsers read the same way;
    # an unescaped quote in a namespace would otherwise rewrite the filter (I8).
    escaped = (
        value.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


def _eq(field: str, value: str) -> str:
    return f"{field} == {_quote(value)}"


def _epoch_ms(moment: datetime) -> int:
    # Integer arithmetic: float timestamps can be off by one millisecond.
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return (aware - _EPOCH) // _MS


def _clip_utf8(text: str, max_bytes: int) -> str:
    encoded = text.encode()
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode(errors="ignore")


def _check_bytes(name: str, value: str, max_bytes: int, where: str) -> None:
    if len(value.encode()) > max_bytes:
        raise MilvusViewError(f"{where}: field {name} is longer than {max_bytes} bytes")
