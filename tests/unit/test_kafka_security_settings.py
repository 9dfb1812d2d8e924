"""Kafka security settings, the kwargs helper, the ACL rules and the compose files that use them."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from pipeline.runtime.kafka import client_kwargs
from pipeline.runtime.settings import KafkaSecurity, Settings, SettingsError
from topics.acls import CLIENT_USER, CLIENT_WRITABLE, SERVICE_USER, acl_rules
from topics.catalogue import TOPICS

ROOT = Path(__file__).resolve().parents[2]

SASL_ENV = {
    "HINDSIGHT_KAFKA_SECURITY_PROTOCOL": "sasl_plaintext",
    "HINDSIGHT_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    "HINDSIGHT_KAFKA_SASL_USERNAME": "hindsight-service",
    "HINDSIGHT_KAFKA_SASL_PASSWORD": "pw",
}


def test_plaintext_is_the_default_and_adds_no_kwargs() -> None:
    assert Settings.from_env({}).kafka == KafkaSecurity()
    assert client_kwargs(KafkaSecurity()) == {} and client_kwargs(None) == {}


def test_sasl_settings_from_the_environment_become_aiokafka_kwargs() -> None:
    security = Settings.from_env(SASL_ENV).kafka
    assert security.protocol == "SASL_PLAINTEXT" and "pw" not in repr(security)
    assert client_kwargs(security) == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "hindsight-service",
        "sasl_plain_password": "pw",
    }
    assert KafkaSecurity.from_env(security.env()) == security  # a child process gets the same


def test_sasl_ssl_adds_a_tls_context() -> None:
    security = KafkaSecurity(
        protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="u", sasl_password="p"
    )
    kwargs = client_kwargs(security)
    assert kwargs["security_protocol"] == "SASL_SSL" and kwargs["ssl_context"] is not None


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"HINDSIGHT_KAFKA_SECURITY_PROTOCOL": "KERBEROS"}, "HINDSIGHT_KAFKA_SECURITY_PROTOCOL"),
        (
            {**SASL_ENV, "HINDSIGHT_KAFKA_SASL_MECHANISM": "GSSAPI"},
            "HINDSIGHT_KAFKA_SASL_MECHANISM",
        ),
        ({**SASL_ENV, "HINDSIGHT_KAFKA_SASL_PASSWORD": ""}, "HINDSIGHT_KAFKA_SASL_PASSWORD"),
        ({"HINDSIGHT_KAFKA_SASL_USERNAME": "u"}, "does not use SASL"),
        ({"HINDSIGHT_KAFKA_SSL_CAFILE": "/ca.pem"}, "HINDSIGHT_KAFKA_SSL_CAFILE"),
        ({"HINDSIGHT_AUTH": "maybe"}, "HINDSIGHT_AUTH"),
    ],
)
def test_bad_security_settings_fail_loudly_naming_the_variable(
    env: dict[str, str], names: str
) -> None:
    with pytest.raises(SettingsError, match=names):
        Settings.from_env(env)


def test_auth_and_api_key_settings() -> None:
    assert Settings().auth is True
    settings = Settings.from_env({"HINDSIGHT_AUTH": "false", "HINDSIGHT_API_KEY": "hs_x"})
    assert settings.auth is False and settings.api_key == "hs_x"
    assert "hs_x" not in repr(settings)


def test_acl_rules_cover_every_input_topic_and_protect_the_keys_topic() -> None:
    rules = acl_rules("p.", "app")
    client = [r for r in rules if r.principal == CLIENT_USER]
    assert len(client) == 1 and client[0].pattern == "literal"
    assert {name for _, name in client[0].resources} == {
        TOPICS[role].name("p.") for role in CLIENT_WRITABLE
    }
    assert [name for _, name in client[0].resources] == [
        "p.hindsight.events.v1",
        "p.hindsight.data-keys.v1",
    ]
    assert set(client[0].operations) == {"Write", "Describe"}  # no Read anywhere
    denies = [r for r in rules if r.permission == "deny"]
    assert [(r.principal, r.resources, r.operations) for r in denies] == [
        (SERVICE_USER, (("topic", "p.hindsight.keys.v1"),), ("Write",))
    ]
    # Every catalogue topic is under the service's prefixed grant.
    prefix = next(r for r in rules if r.principal == SERVICE_USER and r.pattern == "prefixed")
    assert all(spec.name("p.").startswith(prefix.resources[0][1]) for spec in TOPICS.values())


def test_the_compose_acl_script_is_what_acl_rules_renders() -> None:
    script = (ROOT / "infra" / "compose" / "kafka-acls.sh").read_text()
    lines = [shlex.split(line)[1:] for line in script.splitlines() if line.startswith('"${ACLS')]
    assert lines == [rule.acl_command_args() for rule in acl_rules("", "hindsight-worker")]


def test_docker_compose_config_is_valid_and_every_service_authenticates(
    docker_compose: str,
) -> None:
    env = {**os.environ, **{f"KAFKA_{u}_PASSWORD": f"pw-{u.lower()}" for u in (
        "ADMIN", "SERVICE", "CLIENT", "BROKER", "CONTROLLER")}}  # fmt: skip
    result = subprocess.run(
        [docker_compose, "compose", "--profile", "admin", "config", "--format", "json"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    stages = ("prepare", "consolidate", "sink")
    for name in ("topics-init", "admin", *stages, "api"):
        environment = services[name]["environment"]
        assert environment["HINDSIGHT_KAFKA_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT", name
    for stage in stages:
        assert services[stage]["environment"]["HINDSIGHT_KAFKA_SASL_USERNAME"] == SERVICE_USER
    assert services["admin"]["environment"]["HINDSIGHT_KAFKA_SASL_USERNAME"] == "hindsight-admin"
    missing = subprocess.run(
        [docker_compose, "compose", "config", "--quiet"],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")},
    )  # fmt: skip
    assert missing.returncode != 0 and "KAFKA_" in missing.stderr  # no default passwords


def test_faust_gets_the_same_credentials() -> None:
    import faust

    from pipeline.runtime.kafka import faust_credentials

    assert faust_credentials(KafkaSecurity()) is None
    credentials = faust_credentials(Settings.from_env(SASL_ENV).kafka)
    assert isinstance(credentials, faust.SASLCredentials)
    assert credentials.username == "hindsight-service" and credentials.password == "pw"
    assert credentials.mechanism.value == "SCRAM-SHA-512"
    assert credentials.protocol.value == "SASL_PLAINTEXT"
    tls = faust_credentials(
        KafkaSecurity("SASL_SSL", "SCRAM-SHA-512", "u", "p")  # type: ignore[arg-type]
    )
    assert isinstance(tls, faust.SASLCredentials) and tls.protocol.value == "SASL_SSL"
