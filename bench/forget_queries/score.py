"""How well forget by query takes what a request means, and nothing else, on cases nobody tuned on.

``probe.jsonl`` (README.md) holds banks of five to eight statements with one forget request each,
in English and Chinese, written without reading the code, and the indexes of the statements the
request means (none when it asks about something never stored). Each case belongs to one half by
a seeded hash of its id: ``tune`` may be looked at while forgetting changes, ``test`` is only
scored.

    python -m bench.forget_queries.score --half tune [--show]
    python -m bench.forget_queries.score --half test          # rates only

Every case runs through the stages' own code (``LocalPipeline``: the configured encoder,
classifier and attribute model in ``prepare``, then ``consolidate``), in a namespace of its own:
the statements a day apart, the request a day after the last. Prints JSON per half and
language: the share of cases where exactly the meant memories went, the meant memories that went
(recall), the memories that went without being meant (over-forgetting: the harm of a destructive
command), and the cases asking about nothing stored that forgot nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import probe_halves
from pipeline.ingest.local import LocalPipeline
from pipeline.memory.rules.extraction import memory_id
from pipeline.models.encoders import load_encoder
from pipeline.runtime.settings import Settings
from schemas.events import CommandIssued, TurnRecorded

PROBE = Path(__file__).with_name("probe.jsonl")
SPLIT_SEED = "hindsight-forget-queries-probe/"
START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)


def half_of(item_id: str) -> str:
    return probe_halves.half_of(SPLIT_SEED, item_id)


def run_cases(cases: Sequence[dict[str, Any]], settings: Settings) -> list[dict[str, Any]]:
    """Each case's outcome: which statements formed a memory, and which of those were forgotten."""
    encoder = load_encoder(settings.encoder)
    pipeline = LocalPipeline.configured(encoder, settings)
    ids: dict[str, list[str]] = {}
    for case in cases:
        namespace = f"forget-{case['id']}"
        ids[case["id"]] = []
        at = START
        for number, text in enumerate(case["memories"]):
            event_id = f"{case['id']}-m{number}"
            pipeline.publish(
                namespace,
                TurnRecorded(
                    event_id=event_id,
                    namespace=namespace,
                    event_time=at,
                    session_id=f"{case['id']}-s{number}",
                    speaker="user",
                    text=text,
                ),
            )
            ids[case["id"]].append(memory_id(namespace, [event_id], text))
            at += timedelta(days=1)
        pipeline.publish(
            namespace,
            CommandIssued(
                event_id=f"{case['id']}-forget",
                namespace=namespace,
                event_time=at,
                command="forget",
                query=case["query"],
            ),
        )
    pipeline.run(prepare_batch_size=settings.batch_size)
    records = pipeline.records()
    outcomes = []
    for case in cases:
        stored = [i for i, mid in enumerate(ids[case["id"]]) if mid in records]
        forgotten = [i for i in stored if records[ids[case["id"]][i]].status == "forgotten"]
        meant = [i for i in case["forget"] if i in stored]
        outcomes.append(
            {
                "id": case["id"],
                "lang": case["lang"],
                "query": case["query"],
                "memories": case["memories"],
                "stored": stored,
                "meant": meant,
                "forgotten": forgotten,
            }
        )
    return outcomes


def scores(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    exact = sum(set(row["forgotten"]) == set(row["meant"]) for row in rows)
    meant = sum(len(row["meant"]) for row in rows)
    taken = sum(len(set(row["forgotten"]) & set(row["meant"])) for row in rows)
    over = [len(set(row["forgotten"]) - set(row["meant"])) for row in rows]
    nothing = [row for row in rows if not row["meant"]]
    return {
        "cases": len(rows),
        "exact": round(exact / max(1, len(rows)), 3),
        "meant_taken": round(taken / max(1, meant), 3),
        "over_forgotten": sum(over),
        "cases_over_forgetting": sum(1 for n in over if n),
        "nothing_meant_kept_all": f"{sum(not row['forgotten'] for row in nothing)}/{len(nothing)}",
        "statements_not_stored": sum(len(row["memories"]) - len(row["stored"]) for row in rows),
    }


def _missed(row: dict[str, Any]) -> bool:
    return set(row["forgotten"]) != set(row["meant"])


def _describe(row: dict[str, Any]) -> str:
    said = "; ".join(
        f"{'*' if i in row['meant'] else ' '}{'F' if i in row['forgotten'] else '-'}{i} "
        f"{text if i in row['stored'] else '(not stored) ' + text}"
        for i, text in enumerate(row["memories"])
    )
    return f"{row['id']} {row['query']!r}: {said}"


def main(argv: Sequence[str] | None = None) -> int:
    args = probe_halves.parse_arguments(__doc__ or "", argv)
    cases = probe_halves.read_half(PROBE, SPLIT_SEED, args.half)
    rows = run_cases(cases, Settings.from_env())
    if args.show:
        probe_halves.write_misses(rows, _missed, _describe)
    probe_halves.write_report(args.half, rows, scores)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
