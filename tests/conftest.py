"""Root fixtures shared by every test package."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest

# ---------------------------------------------------------------------------------------------
# Kafka broker fixtures (infra). Owner: infrastructure. Add other fixtures below this section.
#
# One broker per test session, picked in this order:
#   1. KAFKA_BOOTSTRAP from the environment (a broker someone already runs; never started here),
#   2. testcontainers' KafkaContainer in KRaft mode, when a Docker engine answers,
#   3. infra.broker.LocalKafka: the real Apache Kafka jars from Maven, run with the local Java.
# Tests isolate themselves with `topic_prefix` instead of fresh brokers, so one start serves all.
# ---------------------------------------------------------------------------------------------

KAFKA_IMAGE = "confluentinc/cp-kafka:7.6.0"  # testcontainers' KRaft-capable default


def _docker_available() -> bool:
    try:
        import docker

        docker.from_env(timeout=2).ping()
    except Exception:  # no client library, no socket, no engine: all mean "no Docker"
        return False
    return True


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a running Kafka broker for the whole session."""
    external = os.environ.get("KAFKA_BOOTSTRAP", "").strip()
    if external:
        yield external
        return
    if _docker_available():
        from testcontainers.community.kafka import KafkaContainer

        with KafkaContainer(KAFKA_IMAGE).with_kraft() as container:
            yield container.get_bootstrap_server()
        return
    from infra.broker import LocalKafka

    with LocalKafka(tmp_path_factory.mktemp("kafka")) as kafka:
        yield kafka.bootstrap


@pytest.fixture
def topic_prefix() -> str:
    """A prefix unique to one test, e.g. ``t1a2b3c4d.``, so tests never share topics."""
    return f"t{uuid.uuid4().hex[:8]}."


# ----------------------------- end of Kafka broker fixtures ----------------------------------


# ---------------------------------------------------------------------------------------------
# Pipeline fixtures: one worker process per session on the session broker, own topic prefix.
# Tests isolate themselves by namespace (`namespace` fixture). Owner: pipeline.
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def stack_settings(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Settings for a running worker: session broker, unique topics, Milvus Lite under tmp."""
    import asyncio

    from pipeline.runtime.settings import Settings
    from pipeline.runtime.stack import WorkerProcess, wait_worker_ready
    from topics.admin import ensure_topics

    data_dir = tmp_path_factory.mktemp("hindsight")
    settings = Settings(
        data_dir=data_dir,
        bootstrap=kafka_bootstrap,
        topic_prefix=f"s{uuid.uuid4().hex[:8]}.",
        app_id=f"hindsight-test-{uuid.uuid4().hex[:6]}",
        partitions=2,
    )
    asyncio.run(ensure_topics(kafka_bootstrap, settings.topic_prefix, settings.partitions, 1))
    worker = WorkerProcess(settings)
    worker.start()
    try:
        asyncio.run(wait_worker_ready(settings, worker))
        yield settings
    finally:
        worker.stop()


@pytest.fixture
def namespace() -> str:
    return f"ns-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def client(stack_settings):  # type: ignore[no-untyped-def]
    from pipeline.interfaces.client import Hindsight
    from pipeline.models.encoders import load_encoder

    async with Hindsight.connect(stack_settings, encoder=load_encoder("minilm")) as connected:
        yield connected


# ----------------------------- end of pipeline fixtures --------------------------------------


# ---------------------------------------------------------------------------------------------
# API key fixtures: keys written to the session stack's keys topic. Owner: security.
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def make_key(stack_settings):  # type: ignore[no-untyped-def]
    """``make_key("team-a:*:recall", ...)`` -> a fresh ``hs_...`` key with those scopes."""
    import asyncio
    import concurrent.futures

    from pipeline.security.management import create_key

    def make(*scopes: str, name: str = "test") -> str:
        # Its own thread and loop, so sync and async tests (inside a running loop) can both call it.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            created = pool.submit(asyncio.run, create_key(stack_settings, scopes, name=name))
            return created.result().token

    return make


@pytest.fixture(scope="session")
def admin_key(make_key) -> str:  # type: ignore[no-untyped-def]
    return str(make_key("*:admin", name="test admin"))


# ----------------------------- end of API key fixtures ---------------------------------------


@pytest.fixture(scope="session")
def docker_compose() -> str:
    """The docker CLI, for tests that render docker-compose.yml; skips unless its compose plugin
    answers (a bare CLI says "unknown command" or, older ones, "unknown flag" to compose's)."""
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("the docker CLI is not installed")
    probe = subprocess.run(
        [docker, "compose", "version"], capture_output=True, text=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        pytest.skip("the docker CLI has no compose plugin")
    return docker
