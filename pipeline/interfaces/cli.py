"""``hindsight`` command line: demo, up, worker, api, mcp, topics, client commands and replay.

Evaluation commands (``bench``, ``scenarios``) are registered through the ``hindsight.commands``
entry-point group by the ``bench`` package, so the product never imports its benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import orjson

from pipeline.runtime.settings import Settings
from schemas.errors import HindsightError

STACK_FILE = "stack.json"


def _settings(args: argparse.Namespace) -> Settings:
    settings = Settings.from_env()
    changes: dict[str, Any] = {}
    for attr in ("bootstrap", "topic_prefix", "app_id", "encoder"):
        value = getattr(args, attr, None)
        if value is not None:
            changes[attr] = value
    if getattr(args, "milvus", None):
        changes["milvus_uri"] = args.milvus
    if getattr(args, "data_dir", None):
        changes["data_dir"] = Path(args.data_dir)
    if getattr(args, "partitions", None):
        changes["partitions"] = args.partitions
    if getattr(args, "api_key", None):
        changes["api_key"] = args.api_key
    if getattr(args, "no_auth", False):
        changes["auth"] = False
    return settings.with_overrides(**changes)


def _client_settings(args: argparse.Namespace) -> Settings:
    """Client commands talk to a running stack: --bootstrap, env, or what `hindsight up` wrote."""
    settings = _settings(args)
    if settings.bootstrap:
        return settings
    stack_file = Path(settings.data_dir) / STACK_FILE
    if stack_file.exists():
        stack = orjson.loads(stack_file.read_bytes())
        # partitions too: `recall --wait-for` maps the namespace to its partition with it.
        # The local admin key `up` wrote (mode 0600), unless a key was given explicitly.
        return settings.with_overrides(
            bootstrap=stack["bootstrap"],
            topic_prefix=stack.get("topic_prefix"),
            partitions=stack.get("partitions"),
            api_key=settings.api_key or stack.get("api_key"),
        )
    raise HindsightError(
        "no running stack: pass --bootstrap HOST:PORT or start one with `hindsight up`"
    )


def _parse_time(value: str | None) -> datetime | None:
    if value is None:
        return None
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _print_json(payload: Any) -> None:
    sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")


# -- commands -------------------------------------------------------------------------------
def cmd_worker(args: argparse.Namespace) -> int:
    from pipeline.ingest.worker import parse_stages, run_worker

    settings = _settings(args)
    if not settings.bootstrap:
        raise HindsightError("worker: --bootstrap HOST:PORT is required (or HINDSIGHT_BOOTSTRAP)")
    if args.metrics_host:
        settings = settings.with_overrides(metrics_host=args.metrics_host)
    port = args.metrics_port if args.metrics_port is not None else settings.metrics_port
    if port:
        from pipeline.runtime.metrics import serve_metrics

        served = serve_metrics(settings.metrics_host, port)
        print(f"worker metrics on http://{settings.metrics_host}:{served.port}/metrics", flush=True)
    run_worker(settings, parse_stages(args.stages), loglevel=args.loglevel)
    return 0


def cmd_topics_create(args: argparse.Namespace) -> int:
    from topics.admin import ensure_topics

    settings = _settings(args)
    if not settings.bootstrap:
        raise HindsightError("topics create: --bootstrap HOST:PORT is required")
    asyncio.run(
        ensure_topics(
            settings.bootstrap,
            settings.topic_prefix,
            settings.partitions,
            args.replication_factor,
            security=settings.kafka,
        )
    )
    print("topics ready")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from pipeline.runtime.demo import run_demo

    return asyncio.run(run_demo(_settings(args)))


def cmd_keys_create(args: argparse.Namespace) -> int:
    from pipeline.security.management import create_key

    created = asyncio.run(
        create_key(_client_settings(args), args.scope, name=args.name, expires_days=args.expires)
    )
    if args.json:
        _print_json({"key": created.token, **_key_summary(created.event)})
    else:
        print(created.token)
        print(
            f"key {created.event.key_id} created; this is the only time it is shown, store it now",
            file=sys.stderr,
        )
    return 0


def _key_summary(record: Any) -> dict[str, Any]:
    return {
        "key_id": record.key_id,
        "name": record.name,
        "scopes": [f"{g.pattern}:{','.join(g.actions)}" for g in record.scopes],
        "created_at": getattr(record, "created_at", None),
        "expires_at": getattr(record, "expires_at", None),
    }


def cmd_keys_list(args: argparse.Namespace) -> int:
    from pipeline.security.management import list_keys

    rows = asyncio.run(list_keys(_client_settings(args)))
    if args.json:
        _print_json(rows)
    else:
        for row in rows:
            expires = f" expires {row['expires_at']}" if row["expires_at"] else ""
            print(f"{row['key_id']}  {row['status']:<8} {row['name'] or '-':<24} "
                  f"{' '.join(row['scopes'])}{expires}")  # fmt: skip
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from pipeline.security.management import revoke_key

    asyncio.run(revoke_key(_client_settings(args), args.key_id, reason=args.reason))
    print(f"key {args.key_id} revoked")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from pipeline.runtime.up import run_up

    return asyncio.run(run_up(_settings(args), api=not args.no_api, mcp_http=args.mcp_http))


def cmd_api(args: argparse.Namespace) -> int:
    from pipeline.interfaces.http import serve_api

    settings = _client_settings(args)
    asyncio.run(serve_api(settings, host=args.host, port=args.port))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from pipeline.interfaces.mcp import run_mcp

    run_mcp(_client_settings(args), transport=args.transport, host=args.host, port=args.port)
    return 0


async def _with_client(args: argparse.Namespace, action: Any) -> Any:
    from pipeline.interfaces.client import Hindsight

    async with Hindsight.connect(_client_settings(args)) as client:
        return await action(client)


def cmd_retain(args: argparse.Namespace) -> int:
    async def action(client: Any) -> Any:
        receipt = await client.retain(
            args.namespace,
            args.text,
            speaker=args.speaker,
            session_id=args.session,
            event_time=_parse_time(args.at),
        )
        if args.wait:
            await client.wait_applied(receipt, timeout=args.timeout)
        return receipt

    receipt = asyncio.run(_with_client(args, action))
    if args.json:
        _print_json(receipt.__dict__)
    else:
        print(
            f"retained {receipt.event_id} at {receipt.topic}[{receipt.partition}]@{receipt.offset}"
        )
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    async def action(client: Any) -> Any:
        return await client.recall(
            args.namespace,
            args.query,
            at=_parse_time(args.at),
            limit=args.limit,
            include_history=args.history,
            wait_for=args.wait_for,
            reinforce=not args.no_reinforce,
        )

    result = asyncio.run(_with_client(args, action))
    if args.json:
        _print_json(result.model_dump(mode="json"))
    else:
        print(result.context or "(no memories)")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    async def action(client: Any) -> Any:
        return await client.forget_and_report(
            args.namespace,
            memory_ids=args.ids or (),
            query=args.query,
            whole_namespace=args.all,
            hard=args.hard,
            reason=args.reason,
            timeout=args.timeout,
        )

    outcome = asyncio.run(_with_client(args, action))
    if args.json:
        _print_json({**outcome.receipt.__dict__, "memory_ids": outcome.memory_ids})
    else:
        verb = "erased" if args.hard else "forgotten"
        taken = ", ".join(outcome.memory_ids) or "nothing matched"
        print(f"{verb} ({outcome.receipt.event_id}): {taken}")
    return 0


def cmd_erase(args: argparse.Namespace) -> int:
    async def action(client: Any) -> Any:
        return await client.erase_namespace(
            args.namespace, reason=args.reason, timeout=args.timeout
        )

    outcome = asyncio.run(_with_client(args, action))
    erasure = outcome.erasure
    payload = {
        **outcome.receipt.__dict__,
        "memory_ids": outcome.memory_ids,
        "keys_destroyed": None if erasure is None else erasure.keys_destroyed,
    }
    if args.json:
        _print_json(payload)
    else:
        keys = (
            "no data keys (encryption off)"
            if erasure is None
            else (f"{erasure.keys_destroyed} data keys destroyed")
        )
        print(
            f"erased namespace {args.namespace} ({outcome.receipt.event_id}): "
            f"{len(outcome.memory_ids)} memories, {keys}"
        )
    return 0


def cmd_policy(args: argparse.Namespace) -> int:
    from schemas.policy import ALL_KINDS, RedactionSettings

    async def action(client: Any) -> Any:
        if args.redact is None:
            return None, await client.policy(args.namespace)
        settings = RedactionSettings(
            enabled=args.redact,
            kinds=args.kinds or list(ALL_KINDS),
            phone_region=args.phone_region,
        )
        return await client.set_policy(args.namespace, settings), settings

    receipt, settings = asyncio.run(_with_client(args, action))
    payload = {"redaction": settings.model_dump(mode="json")}
    if receipt is not None:
        payload["receipt"] = receipt.__dict__
    if args.json:
        _print_json(payload)
    elif not settings.enabled:
        print(
            f"{args.namespace}: redaction off"
            + (f" from offset {receipt.offset}" if receipt else "")
        )
    else:
        where = f" from offset {receipt.offset}" if receipt else ""
        region = (
            f", national phone formats of {settings.phone_region}" if settings.phone_region else ""
        )
        print(f"{args.namespace}: redacting {', '.join(settings.kinds)}{region}{where}")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    async def action(client: Any) -> Any:
        return await client.inspect(args.namespace, args.memory_id, reveal=args.reveal)

    record = asyncio.run(_with_client(args, action))
    payload = record.model_dump(mode="json", exclude={"vector"})
    if args.json:
        _print_json(payload)
    else:
        print(f"{record.id} [{record.region}/{record.kind}] status={record.status}")
        print(f"  importance={record.importance:.2f} activation={record.activation:.2f}")
        print(f"  {record.content}")
        for source in record.provenance:
            when = f"{source.event_time:%Y-%m-%d %H:%M}"
            print(f"  from turn {source.event_id} ({source.session_id}, {source.speaker}, {when})")
        for entry in record.history:
            when = f"{entry.at:%Y-%m-%d %H:%M}"
            print(f"  {when} {entry.change} {entry.detail} (cause {entry.cause_event_id})")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    async def action(client: Any) -> Any:
        return await client.stats(args.namespace)

    stats = asyncio.run(_with_client(args, action))
    if args.json:
        _print_json(stats)
    else:
        for key, value in stats.items():
            print(f"{key}: {value}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from pipeline.ingest.replay import run_replay

    settings = _client_settings(args)
    summary = asyncio.run(
        run_replay(
            settings,
            Path(args.into),
            reindex=args.reindex,
            re_extract=args.re_extract,
            until=_parse_time(args.until),
            progress=not args.json,
        )
    )
    _print_json(summary) if args.json else print(json.dumps(summary, indent=2, default=str))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hindsight", description=__doc__)
    parser.add_argument("--log-level", default="WARNING")
    sub = parser.add_subparsers(dest="command", required=True)

    def stack_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bootstrap", help="Kafka bootstrap HOST:PORT (default: embedded broker)")
        p.add_argument("--data-dir", help="where everything lives (default .hindsight)")
        p.add_argument("--topic-prefix")
        p.add_argument("--partitions", type=int)

    p = sub.add_parser(
        "demo", help="start the embedded stack, ingest a sample conversation, print memories"
    )
    stack_options(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("up", help="run broker + worker + API as a long-lived service")
    stack_options(p)
    p.add_argument("--no-api", action="store_true")
    p.add_argument("--no-auth", action="store_true", help="serve without API keys (loopback only)")
    p.add_argument("--mcp-http", action="store_true", help="also serve MCP over streamable HTTP")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("worker", help="run pipeline stages against an existing Kafka and Milvus")
    stack_options(p)
    p.add_argument(
        "--stages",
        default="prepare,consolidate,sink",
        help="comma-separated stages to run in this process (default: all three)",
    )
    p.add_argument("--milvus", help="Milvus URI: a Milvus Lite file path or http://host:19530")
    p.add_argument("--app-id")
    p.add_argument("--encoder")
    p.add_argument("--loglevel", default="info")
    p.add_argument(
        "--metrics-port",
        type=int,
        help="serve Prometheus /metrics on this port (default HINDSIGHT_METRICS_PORT; 0: off)",
    )
    p.add_argument("--metrics-host", help="address for /metrics (default 127.0.0.1)")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("api", help="serve the HTTP API against a running stack")
    stack_options(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--no-auth", action="store_true", help="serve without API keys (loopback only)")
    p.set_defaults(func=cmd_api)

    p = sub.add_parser("mcp", help="serve the MCP server (stdio or streamable HTTP)")
    stack_options(p)
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8766)
    p.add_argument("--api-key", help="stdio: the key every tool call uses (HINDSIGHT_API_KEY)")
    p.add_argument("--no-auth", action="store_true", help="serve without API keys (loopback only)")
    p.set_defaults(func=cmd_mcp)

    topics = sub.add_parser("topics", help="topic administration").add_subparsers(
        dest="topics_command", required=True
    )
    p = topics.add_parser("create", help="create every catalogue topic (idempotent)")
    stack_options(p)
    p.add_argument("--replication-factor", type=int, default=1)
    p.set_defaults(func=cmd_topics_create)

    keys = sub.add_parser("keys", help="API keys: create, list, revoke").add_subparsers(
        dest="keys_command", required=True
    )
    p = keys.add_parser("create", help="create a key; it is printed once")
    stack_options(p)
    p.add_argument(
        "--scope",
        action="append",
        required=True,
        help="PATTERN:ACTIONS, e.g. 'team-a:*:recall,retain' or '*:admin' (repeatable); "
        "actions: retain, recall, forget, erase, admin",
    )
    p.add_argument("--name", default="", help="a label shown by `keys list`")
    p.add_argument("--expires", type=float, help="days until the key expires")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_keys_create)
    p = keys.add_parser("list", help="every key with its status and scopes (no secrets)")
    stack_options(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_keys_list)
    p = keys.add_parser("revoke", help="revoke a key (every API process sees it)")
    stack_options(p)
    p.add_argument("key_id")
    p.add_argument("--reason")
    p.set_defaults(func=cmd_keys_revoke)

    p = sub.add_parser("retain", help="publish one turn")
    stack_options(p)
    p.add_argument("namespace")
    p.add_argument("text")
    p.add_argument("--speaker", default="user")
    p.add_argument("--session", default="default")
    p.add_argument("--at", help="event time, ISO-8601")
    p.add_argument("--wait", action="store_true", help="wait until the views applied it")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_retain)

    p = sub.add_parser("recall", help="recall memories for a query")
    stack_options(p)
    p.add_argument("namespace")
    p.add_argument("query")
    p.add_argument("--at", help="as-of time, ISO-8601")
    p.add_argument("--limit", type=int)
    p.add_argument(
        "--history", action="store_true", help="include superseded/forgotten with their chain"
    )
    p.add_argument("--wait-for", type=int, help="turn offset to wait for (read-your-writes)")
    p.add_argument("--no-reinforce", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_recall)

    p = sub.add_parser("forget", help="forget memories (soft by default)")
    stack_options(p)
    p.add_argument("namespace")
    p.add_argument("--ids", nargs="*")
    p.add_argument("--query")
    p.add_argument("--all", action="store_true", help="the whole namespace")
    p.add_argument("--hard", action="store_true", help="erase instead of marking forgotten")
    p.add_argument("--reason")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser(
        "erase",
        help="erase a whole namespace for good: its memories and every data key of its content",
    )
    stack_options(p)
    p.add_argument("namespace")
    p.add_argument("--reason")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_erase)

    p = sub.add_parser("inspect", help="show a memory with provenance and history")
    stack_options(p)
    p.add_argument("namespace")
    p.add_argument("memory_id")
    p.add_argument(
        "--reveal", action="store_true", help="put redacted values back (from the original turns)"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser(
        "policy",
        help="show or set a namespace's redaction of personal data and secrets (opt-in)",
    )
    stack_options(p)
    p.add_argument("namespace")
    switch = p.add_mutually_exclusive_group()
    switch.add_argument("--redact", dest="redact", action="store_true", default=None)
    switch.add_argument("--no-redact", dest="redact", action="store_false")
    p.add_argument(
        "--kinds",
        nargs="+",
        choices=["SECRET", "EMAIL", "CN_ID", "CARD", "IBAN", "PHONE"],
        help="what to redact (default: all)",
    )
    p.add_argument("--phone-region", help="ISO 3166 code for national phone formats, e.g. US")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_policy)

    p = sub.add_parser("stats", help="counts by status, kind and region")
    stack_options(p)
    p.add_argument("namespace")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("replay", help="rebuild every derived view from the log into a fresh target")
    stack_options(p)
    p.add_argument("--into", required=True, help="directory for the rebuilt views")
    p.add_argument(
        "--reindex",
        action="store_true",
        help="re-run prepare with the configured encoder into a prepared topic named after it",
    )
    p.add_argument("--until", help="only events up to this event time (ISO-8601): belief at T")
    p.add_argument(
        "--re-extract",
        action="store_true",
        help="call the configured LLM again for every remembered turn and record new extractions",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_replay)

    # Evaluation commands (bench, scenarios) plug in from outside the product package.
    for entry in entry_points(group="hindsight.commands"):
        entry.load()(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from pipeline.runtime.quiet import quiet_known_transients

    quiet_known_transients()
    try:
        return int(args.func(args) or 0)
    except HindsightError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
