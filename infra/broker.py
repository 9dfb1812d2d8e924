"""Run Apache Kafka 4.x (KRaft, no ZooKeeper) on loopback as ``java`` subprocesses.

``LocalKafka`` is one combined broker+controller node; ``LocalKafkaCluster`` is three of them
forming one KRaft quorum, for failure tests. Both run the real broker from Maven Central
(invariant I9: the embedded default is the same code path as a production cluster), started from
the jars that ``infra.jars.ensure_jars`` resolves.

Everything a node needs lives under its data dir::

    <data_dir>/node.json          cluster id, node id and ports, so a restart finds the same broker
    <data_dir>/server.properties  regenerated on every start
    <data_dir>/data/              the formatted KRaft log dir (topics and metadata)
    <data_dir>/logs/              server.log (log4j2) and stdout.log (JVM output)

Restarting on the same data dir keeps every message: the storage is formatted once and reused.

``security="scram"`` turns on SASL/SCRAM-SHA-512 with ACLs (StandardAuthorizer, nothing allowed
unless an ACL says so). The users (``hindsight-admin`` super user, ``hindsight-service``,
``hindsight-client``, and the broker's own inter-broker user) get random passwords at format
time (``kafka-storage format --add-scram``), kept in ``<data_dir>/credentials.json`` (0600).
The controller listener uses SASL/PLAIN with a static user (KRaft controllers cannot use SCRAM:
its credentials live in the metadata the controller serves). No TLS: the broker only listens on
loopback, where traffic is not observable without root, and root can read the data dir anyway
(docs/SECURITY.md says when TLS is required: any non-loopback listener).
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import concurrent.futures
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from infra.jars import INFRA_DIR, check_java, classpath, ensure_jars, find_java
from schemas.errors import HindsightError

HOST = "127.0.0.1"  # never listen on or advertise anything but loopback
MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
LOG4J_CONFIG = INFRA_DIR / "log4j2.properties"
STATE_FILE = "node.json"
DEFAULT_HEAP = "512m"
DEFAULT_START_TIMEOUT_S = 90.0
DEFAULT_STOP_TIMEOUT_S = 30.0

# Broker settings for a development node. Sizes are small because the broker shares a laptop (or a
# 2-core CI box) with the pipeline; everything else is Kafka's default.
BASE_CONFIG: dict[str, str] = {
    "process.roles": "broker,controller",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    # Topics are created on purpose, from topics/catalogue.py by ensure_topics, and Faust creates
    # its internal topics (changelogs, leader topic) with explicit CreateTopics requests, so a typo
    # in a topic name must fail loudly instead of silently creating a one-partition topic.
    "auto.create.topics.enable": "false",
    # A consumer group starts at once instead of waiting 3 s for more members (tests, one worker).
    "group.initial.rebalance.delay.ms": "0",
    # 50 offset partitions are created on the first group join; 10 is plenty for one machine and
    # keeps that first join fast.
    "offsets.topic.num.partitions": "10",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
    # The cleaner looks for cleanable logs every second instead of every 15 s, so an erase's
    # tombstoned data keys leave the segment files soon after their segment rolls
    # (docs/ERASURE.md); a cleaner with nothing to do costs nothing measurable.
    "log.cleaner.backoff.ms": "1000",
}


def _internal_topic_config(nodes: int) -> dict[str, str]:
    """Replication of Kafka's own topics, bounded by the node count (one node cannot hold RF 3)."""
    rf = str(min(3, nodes))
    min_isr = str(min(2, nodes))
    return {
        "default.replication.factor": rf,
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": min_isr,
    }


# Failure detection for multi-node tests: a killed node is fenced (and dropped from the ISR of its
# partitions) within seconds instead of the defaults (9 s / 30 s): acks=all writes stall briefly.
FAST_FAILOVER_CONFIG: dict[str, str] = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "5000",
}


class BrokerError(HindsightError):
    """A local broker failed to format, start or stop; the message quotes its log."""


Security = Literal["none", "scram"]
SECURITY_MODES: tuple[str, ...] = ("none", "scram")
SCRAM = "SCRAM-SHA-512"
CREDENTIALS_FILE = "credentials.json"
BROKER_USER = "hindsight-broker"
CONTROLLER_USER = "hindsight-controller"
# The users created at format time; the first is the super user tools and tests administer with.
SCRAM_USERS = ("hindsight-admin", "hindsight-service", "hindsight-client", BROKER_USER)
SUPER_USERS = ("hindsight-admin", BROKER_USER, CONTROLLER_USER)
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def load_credentials(path: Path) -> dict[str, str]:
    """user -> password, created once (random) and reused, so a restart keeps the same users."""
    users = (*SCRAM_USERS, CONTROLLER_USER)
    if path.is_file():
        stored: dict[str, str] = json.loads(path.read_text())
        if set(users) <= set(stored):
            return stored
        raise BrokerError(f"{path}: missing users {sorted(set(users) - set(stored))}")
    created = {user: secrets.token_urlsafe(24) for user in users}
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_private(path, json.dumps(created, indent=2) + "\n")
    return created


def _jaas(module: str, user: str, password: str, extra: str = "") -> str:
    return f'{module} required username="{user}" password="{password}"{extra};'


def scram_config(credentials: Mapping[str, str]) -> dict[str, str]:
    """Broker settings for SASL/SCRAM on the client listener, PLAIN on the controller's, ACLs."""
    controller = credentials[CONTROLLER_USER]
    return {
        "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name": "CLIENT",
        "sasl.enabled.mechanisms": SCRAM,
        "listener.name.client.sasl.enabled.mechanisms": SCRAM,
        "sasl.mechanism.inter.broker.protocol": SCRAM,
        "listener.name.client.scram-sha-512.sasl.jaas.config": _jaas(
            "org.apache.kafka.common.security.scram.ScramLoginModule",
            BROKER_USER,
            credentials[BROKER_USER],
        ),
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": _jaas(
            "org.apache.kafka.common.security.plain.PlainLoginModule",
            CONTROLLER_USER,
            controller,
            f' user_{CONTROLLER_USER}="{controller}"',
        ),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": ";".join(f"User:{user}" for user in SUPER_USERS),
        "allow.everyone.if.no.acl.found": "false",
    }


def client_properties(user: str, password: str) -> str:
    """A Java client config file (for ``--command-config``) that logs in as ``user``."""
    jaas = _jaas("org.apache.kafka.common.security.scram.ScramLoginModule", user, password)
    return f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={SCRAM}\nsasl.jaas.config={jaas}\n"


def _security_kwargs(credentials: Mapping[str, str] | None, user: str) -> dict[str, Any]:
    if credentials is None:
        return {}
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": SCRAM,
        "sasl_plain_username": user,
        "sasl_plain_password": credentials[user],
    }


def free_port() -> int:
    """A loopback port nobody listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Same option the JVM sets, so a port in TIME_WAIT after our own broker stopped counts free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid form).

    An id starting with "-" would be read as an option by the storage tool's argument parser.
    """
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not candidate.startswith("-"):
            return candidate


@dataclass(frozen=True)
class NodeState:
    """What must survive a restart: the same cluster id, node id and (if possible) ports."""

    cluster_id: str
    node_id: int
    port: int
    controller_port: int


def render_properties(config: Mapping[str, str]) -> str:
    lines = ["# Written by infra/broker.py on every start; edits are overwritten."]
    lines += [f"{key}={value}" for key, value in sorted(config.items())]
    return "\n".join(lines) + "\n"


def tail_file(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# A group and a transactional id nobody uses: asking for their coordinators makes the broker
# create its offsets and transaction-state topics and elect their leaders before anyone joins.
READINESS_KEY = "hindsight-readiness-probe"


async def _count_live_brokers(
    bootstrap: str,
    timeout_s: float,
    kwargs: Mapping[str, Any] | None = None,
    coordinators: bool = False,
) -> int:
    """Brokers listed in a real Metadata response; KRaft lists a broker only once it is unfenced.

    With ``coordinators``, 0 until the group and transaction coordinators answer too: a fresh
    broker creates their internal topics on first request, and a worker that asked first would
    log GroupCoordinatorNotAvailable as an error while it waited (seen on a loaded machine)."""
    from aiokafka.admin import AIOKafkaAdminClient  # local import: only probes need aiokafka
    from aiokafka.errors import KafkaError

    ms = max(1000, int(timeout_s * 1000))
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=ms, **dict(kwargs or {})
    )
    try:
        await asyncio.wait_for(admin.start(), timeout_s)
        cluster: dict[str, Any] = await asyncio.wait_for(admin.describe_cluster(), timeout_s)
        if coordinators:
            try:
                for kind in (0, 1):  # the group coordinator, then the transaction coordinator
                    await asyncio.wait_for(admin.find_coordinator(READINESS_KEY, kind), timeout_s)
            except KafkaError:
                return 0
        return len(cluster.get("brokers", []))
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


def accepts_tcp(bootstrap: str) -> bool:
    """Cheap pre-check: the admin client is not started (nor logs) against a port that is closed."""
    for address in bootstrap.split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                return True
        except OSError:
            continue
    return False


def probe_live_brokers(
    bootstrap: str,
    timeout_s: float = 3.0,
    kwargs: Mapping[str, Any] | None = None,
    coordinators: bool = False,
) -> int:
    """Synchronous probe, safe to call from inside a running event loop (it uses its own thread)."""
    if not accepts_tcp(bootstrap):
        return 0
    probe = _count_live_brokers(bootstrap, timeout_s, kwargs, coordinators)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, probe).result()


class _Node:
    """One combined broker+controller JVM and its data dir; shared by both public classes."""

    def __init__(
        self,
        data_dir: Path,
        state: NodeState,
        voters: str,
        config: Mapping[str, str],
        heap: str,
        lib_dir: Path,
        java: str,
        credentials: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.credentials = credentials
        self.state = state
        self.voters = voters
        self.config = dict(config)
        self.heap = heap
        self.lib_dir = lib_dir
        self.java = java
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.state.port}"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def storage_dir(self) -> Path:
        return self.data_dir / "data"

    @property
    def properties_path(self) -> Path:
        return self.data_dir / "server.properties"

    def server_config(self) -> dict[str, str]:
        s = self.state
        listener = "PLAINTEXT" if self.credentials is None else "CLIENT"
        secured = {} if self.credentials is None else scram_config(self.credentials)
        return {
            **BASE_CONFIG,
            **self.config,
            **secured,
            "node.id": str(s.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": f"{listener}://{HOST}:{s.port},CONTROLLER://{HOST}:{s.controller_port}",
            "advertised.listeners": f"{listener}://{HOST}:{s.port}",
            "log.dirs": str(self.storage_dir),
        }

    def log_tail(self, lines: int = 40) -> str:
        parts = []
        for name in ("stdout.log", "server.log"):
            text = tail_file(self.log_dir / name, lines)
            if text.strip():
                parts.append(f"--- {self.log_dir / name} (last lines) ---\n{text}")
        return "\n".join(parts) or f"(no log output in {self.log_dir})"

    def _java_cmd(self, main_class: str, *args: str) -> list[str]:
        return [
            self.java,
            "-Xms64m",
            f"-Xmx{self.heap}",
            # Serial GC: the smallest footprint and no GC threads competing with the pipeline.
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={self.log_dir}",
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            "-cp",
            classpath(self.lib_dir),
            main_class,
            *args,
        ]

    def prepare(self) -> None:
        """Write the config and format the storage unless an earlier run already did."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / STATE_FILE).write_text(json.dumps(asdict(self.state), indent=2) + "\n")
        # Owner-only: with SCRAM it holds the broker's own passwords.
        _write_private(self.properties_path, render_properties(self.server_config()))
        if (self.storage_dir / "meta.properties").is_file():
            return  # formatted before: reuse it so the data survives the restart
        scram: list[str] = []
        for user in SCRAM_USERS if self.credentials is not None else ():
            assert self.credentials is not None
            scram += ["--add-scram", f"{SCRAM}=[name={user},password={self.credentials[user]}]"]
        cmd = self._java_cmd(
            STORAGE_TOOL,
            "format",
            "--cluster-id",
            self.state.cluster_id,
            "--config",
            str(self.properties_path),
            *scram,
        )
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise BrokerError(
                f"kafka storage format failed for node {self.state.node_id} in "
                f"{self.storage_dir} (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
            )

    def launch(self) -> None:
        if self.running:
            return
        stdout = (self.log_dir / "stdout.log").open("ab")
        try:
            self.proc = subprocess.Popen(
                self._java_cmd(MAIN_CLASS, str(self.properties_path)),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                # Own process group: a Ctrl-C meant for the test runner must not kill the broker
                # before our orderly stop() runs.
                start_new_session=True,
            )
        finally:
            stdout.close()  # the child keeps its own handle

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.running and self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        """SIGTERM (controlled shutdown), then SIGKILL if the JVM has not exited in time."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                proc.wait(10)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: a crash, no controlled shutdown, for failure tests."""
        proc = self.proc
        if proc is None:
            return
        self.signal(signal.SIGKILL)
        proc.wait(10)
        self.proc = None


def _wait_ready(nodes: Sequence[_Node], expected: int, timeout_s: float) -> None:
    """Poll until a Metadata request lists ``expected`` live brokers, or fail with the log tails."""
    kwargs = _security_kwargs(nodes[0].credentials, SCRAM_USERS[0]) if nodes else {}
    deadline = time.monotonic() + timeout_s
    bootstrap = ",".join(n.bootstrap for n in nodes if n.running)
    last_error = "no answer yet"
    while True:
        for node in nodes:
            if node.proc is not None and node.proc.poll() is not None:
                code = node.proc.returncode
                node.proc = None
                raise BrokerError(
                    f"kafka node {node.state.node_id} exited with code {code} during start\n"
                    f"{node.log_tail()}"
                )
        try:
            live = probe_live_brokers(bootstrap, timeout_s=3.0, kwargs=kwargs, coordinators=True)
            if live >= expected:
                return
            last_error = f"{live} of {expected} brokers live with their coordinators"
        except Exception as exc:  # any failure just means "not ready yet"
            last_error = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            tails = "\n".join(n.log_tail() for n in nodes)
            raise BrokerError(
                f"kafka at {bootstrap} not ready after {timeout_s:.0f}s ({last_error})\n{tails}"
            )
        time.sleep(0.5)


def _load_state(data_dir: Path) -> NodeState | None:
    path = data_dir / STATE_FILE
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
        return NodeState(
            cluster_id=str(raw["cluster_id"]),
            node_id=int(raw["node_id"]),
            port=int(raw["port"]),
            controller_port=int(raw["controller_port"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise BrokerError(f"{path}: unreadable node state ({exc}); delete the data dir") from exc


def _pick_port(wanted: int | None, previous: int | None, taken: set[int]) -> int:
    """The given port, else the one used last time (if free), else a fresh one."""
    if wanted is not None:
        return wanted
    if previous is not None and previous not in taken and port_is_free(previous):
        return previous
    while True:
        port = free_port()
        if port not in taken:
            return port


def _check_security(security: str) -> Security:
    if security not in SECURITY_MODES:
        choices = ", ".join(SECURITY_MODES)
        raise BrokerError(f"security: expected one of {choices}, got {security!r}")
    return security  # type: ignore[return-value]


class _Secured:
    """What both broker classes offer once ``security="scram"``: users, client kwargs, ACLs."""

    data_dir: Path
    _security: Security
    _lib_dir: Path | None

    @property
    def bootstrap(self) -> str:  # pragma: no cover - implemented by both classes
        raise NotImplementedError

    @property
    def credentials(self) -> dict[str, str] | None:
        if self._security != "scram":
            return None
        return load_credentials(self.data_dir / CREDENTIALS_FILE)

    def client_kwargs(self, user: str = SCRAM_USERS[0]) -> dict[str, Any]:
        """aiokafka keyword arguments that log in as ``user`` (none without security)."""
        credentials = self.credentials
        if credentials is not None and user not in SCRAM_USERS:
            raise BrokerError(f"user: expected one of {', '.join(SCRAM_USERS)}, got {user!r}")
        return _security_kwargs(credentials, user)

    def apply_acls(self, rules: Sequence[Any], timeout_s: float = 120.0) -> None:
        """Create ACLs (``topics.acls.AclRule``) with Kafka's AclCommand, as the super user."""
        credentials = self.credentials
        if credentials is None:
            raise BrokerError("apply_acls: the broker runs without security; start with scram")
        admin = SCRAM_USERS[0]
        config = self.data_dir / "admin-client.properties"
        _write_private(config, client_properties(admin, credentials[admin]))
        jars, java = _runtime(self._lib_dir)
        # One JVM per rule, all at once: each spends most of its seconds starting up.
        running = []
        for rule in rules:
            cmd = [
                java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
                f"-Dkafka.logs.dir={self.data_dir / 'logs'}",
                "-cp", classpath(jars), ACL_COMMAND,
                "--bootstrap-server", self.bootstrap, "--command-config", str(config),
                *rule.acl_command_args(),
            ]  # fmt: skip
            running.append(
                (rule, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
            )
        failures = []
        for rule, proc in running:
            try:
                output, _ = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                output, _ = proc.communicate()
            if proc.returncode != 0:
                failures.append(
                    f"{rule} (exit {proc.returncode}):\n{output.decode(errors='replace')}"
                )
        if failures:
            raise BrokerError("AclCommand failed for " + "\n".join(failures))


def _runtime(lib_dir: Path | None) -> tuple[Path, str]:
    jars = ensure_jars(lib_dir)
    java = find_java()
    check_java(java)
    return jars, java


class LocalKafka(_Secured):
    """One KRaft node (broker and controller in one JVM) on 127.0.0.1.

    ``with LocalKafka(".hindsight/kafka") as kafka: kafka.bootstrap`` -> ``"127.0.0.1:<port>"``.
    ``LocalKafka(dir, security="scram")``: SASL/SCRAM users and ACLs (see the module docstring);
    ``kafka.client_kwargs("hindsight-service")`` logs a client in as that user.
    """

    def __init__(
        self,
        data_dir: Path | str,
        port: int | None = None,
        *,
        controller_port: int | None = None,
        heap: str = DEFAULT_HEAP,
        lib_dir: Path | None = None,
        config: Mapping[str, str] | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        security: Security = "none",
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self._security = _check_security(security)
        self._port = port
        self._controller_port = controller_port
        self._heap = heap
        self._lib_dir = lib_dir
        self._config = {**_internal_topic_config(1), **(config or {})}
        self._start_timeout_s = start_timeout_s
        self._node: _Node | None = None

    @property
    def bootstrap(self) -> str:
        if self._node is None:
            raise BrokerError(f"LocalKafka({self.data_dir}): not started; call start() first")
        return self._node.bootstrap

    @property
    def running(self) -> bool:
        return self._node is not None and self._node.running

    def log_tail(self, lines: int = 40) -> str:
        return self._node.log_tail(lines) if self._node else ""

    def start(self) -> LocalKafka:
        if self.running:
            return self
        jars, java = _runtime(self._lib_dir)
        previous = _load_state(self.data_dir)
        port = _pick_port(self._port, previous.port if previous else None, set())
        cport = _pick_port(
            self._controller_port, previous.controller_port if previous else None, {port}
        )
        state = NodeState(
            cluster_id=previous.cluster_id if previous else new_cluster_id(),
            node_id=previous.node_id if previous else 1,
            port=port,
            controller_port=cport,
        )
        node = _Node(
            self.data_dir,
            state,
            voters=f"{state.node_id}@{HOST}:{cport}",
            config=self._config,
            heap=self._heap,
            lib_dir=jars,
            java=java,
            credentials=self.credentials,
        )
        node.prepare()
        node.launch()
        self._node = node
        atexit.register(self.stop)  # never leave an orphan JVM behind a crashed test run
        try:
            _wait_ready([node], expected=1, timeout_s=self._start_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        if self._node is not None:
            self._node.stop(timeout_s)
        # Unregistered only after the JVM is gone: an interrupted stop is retried at exit.
        atexit.unregister(self.stop)

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class LocalKafkaCluster(_Secured):
    """``brokers`` KRaft nodes on loopback, each a combined broker+controller, for failure tests.

    Every node votes in the controller quorum, so with three nodes any one can be killed and the
    quorum (two of three) keeps electing leaders. ``kill(i)`` is a crash (SIGKILL); ``restart(i)``
    brings node ``i`` back on its data dir and ports.
    """

    def __init__(
        self,
        data_dir: Path | str,
        brokers: int = 3,
        *,
        heap: str = "384m",
        lib_dir: Path | None = None,
        config: Mapping[str, str] | None = None,
        start_timeout_s: float = 120.0,
        security: Security = "none",
    ) -> None:
        if brokers < 1:
            raise BrokerError(f"brokers: need at least 1, got {brokers}")
        self.data_dir = Path(data_dir).resolve()
        self._security = _check_security(security)
        self.size = brokers
        self._heap = heap
        self._lib_dir = lib_dir
        self._config = {**_internal_topic_config(brokers), **FAST_FAILOVER_CONFIG, **(config or {})}
        self._start_timeout_s = start_timeout_s
        self._nodes: list[_Node] = []

    @property
    def bootstrap(self) -> str:
        if not self._nodes:
            raise BrokerError(f"LocalKafkaCluster({self.data_dir}): not started")
        return ",".join(n.bootstrap for n in self._nodes)

    def node_bootstrap(self, i: int) -> str:
        return self._node(i).bootstrap

    def running(self, i: int) -> bool:
        return self._node(i).running

    def _node(self, i: int) -> _Node:
        if not 0 <= i < len(self._nodes):
            raise BrokerError(f"node index {i}: cluster has {len(self._nodes)} started nodes")
        return self._nodes[i]

    def start(self) -> LocalKafkaCluster:
        if self._nodes:
            return self
        jars, java = _runtime(self._lib_dir)
        dirs = [self.data_dir / f"node{i}" for i in range(self.size)]
        previous = [_load_state(d) for d in dirs]
        cluster_id = next((p.cluster_id for p in previous if p), None) or new_cluster_id()
        taken: set[int] = set()
        states = []
        for i, prev in enumerate(previous):
            port = _pick_port(None, prev.port if prev else None, taken)
            taken.add(port)
            cport = _pick_port(None, prev.controller_port if prev else None, taken)
            taken.add(cport)
            states.append(NodeState(cluster_id, i + 1, port, cport))
        voters = ",".join(f"{s.node_id}@{HOST}:{s.controller_port}" for s in states)
        credentials = self.credentials  # one set of users for the whole cluster
        self._nodes = [
            _Node(d, s, voters, self._config, self._heap, jars, java, credentials)
            for d, s in zip(dirs, states, strict=True)
        ]
        atexit.register(self.stop)
        try:
            for node in self._nodes:
                node.prepare()
            for node in self._nodes:
                node.launch()
            _wait_ready(self._nodes, expected=self.size, timeout_s=self._start_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def kill(self, i: int) -> None:
        """Crash node ``i`` (SIGKILL): no controlled shutdown, like a lost machine."""
        self._node(i).kill()

    def restart(self, i: int, timeout_s: float | None = None) -> None:
        """Start node ``i`` again on its data dir and ports; wait until all nodes are live."""
        node = self._node(i)
        node.stop()
        node.launch()
        live = [n for n in self._nodes if n.running]
        _wait_ready(live, expected=len(live), timeout_s=timeout_s or self._start_timeout_s)

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        for node in self._nodes:
            node.signal(signal.SIGTERM)  # all at once: controlled shutdowns overlap
        for node in self._nodes:
            node.stop(timeout_s)
        self._nodes = []
        atexit.unregister(self.stop)

    def __iter__(self) -> Iterator[str]:
        return (n.bootstrap for n in self._nodes)

    def __enter__(self) -> LocalKafkaCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m infra.broker [DATA_DIR] [--port N]``: run one node until Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(description="Run a local single-node Kafka (KRaft).")
    parser.add_argument("data_dir", nargs="?", default=os.path.join(".hindsight", "kafka"))
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # SIGTERM (a supervisor, `kill`) must stop the broker as cleanly as Ctrl-C; SIGINT is set
    # explicitly because a shell starting us in the background leaves it ignored.
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    # suppress() is outermost so the broker's own __exit__ (the orderly stop) runs first.
    with contextlib.suppress(KeyboardInterrupt), LocalKafka(args.data_dir, args.port) as kafka:
        print(f"kafka ready at {kafka.bootstrap} (data in {kafka.data_dir}); Ctrl-C stops it")
        while kafka.running:
            time.sleep(1.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
