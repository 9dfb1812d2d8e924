"""Kafka ACLs for a secured cluster, derived from the catalogue (pure: rules, not I/O).

Principals (SASL/SCRAM users):
- ``hindsight-admin``   super user: creates topics, writes API keys, manages ACLs.
- ``hindsight-service`` the worker, the API and MCP servers: reads the input topics and writes
  the derived ones (and its Faust internals under ``app_id``); reads the keys topic but may not
  write it, so a compromised API process cannot mint keys.
- ``hindsight-client``  an application that only publishes: may produce to the input log and to
  the data-key topic (the keys that seal what it publishes) and nothing else (no reading any
  topic, not even its own writes).
The broker's own users (inter-broker, controller) are super users configured on the broker.

``acl_command_args`` renders a rule for Kafka's ``kafka-acls`` tool (``AclCommand``), which the
embedded broker runs and which docs/SECURITY.md shows for a real cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from topics.catalogue import TOPICS, Role

ADMIN_USER = "hindsight-admin"
SERVICE_USER = "hindsight-service"
CLIENT_USER = "hindsight-client"

Resource = Literal["topic", "group", "transactional-id"]

# What a publishing client may write: the one input log (turns, commands, signals) and, to seal
# what it publishes (docs/ERASURE.md), the data keys it creates for it.
CLIENT_WRITABLE: tuple[Role, ...] = ("events", "data_keys")


@dataclass(frozen=True)
class AclRule:
    principal: str
    resources: tuple[tuple[Resource, str], ...]
    operations: tuple[str, ...]
    pattern: Literal["literal", "prefixed"] = "literal"
    permission: Literal["allow", "deny"] = "allow"

    def acl_command_args(self) -> list[str]:
        args = ["--add", "--force", f"--{self.permission}-principal", f"User:{self.principal}"]
        for operation in self.operations:
            args += ["--operation", operation]
        for kind, name in self.resources:
            args += [f"--{kind}", name]
        return [*args, "--resource-pattern-type", self.pattern]


def acl_rules(prefix: str = "", app_id: str = "hindsight-worker") -> list[AclRule]:
    """The ACLs that let each principal do its job and nothing more, for one deployment."""
    input_topics = tuple(("topic", TOPICS[role].name(prefix)) for role in CLIENT_WRITABLE)
    keys_topic = TOPICS["keys"].name(prefix)
    return [
        # Every catalogue topic (all are named "<prefix>hindsight."): read the input, write views.
        AclRule(
            SERVICE_USER,
            (("topic", f"{prefix}hindsight."),),
            ("Read", "Write", "Describe", "DescribeConfigs"),
            pattern="prefixed",
        ),
        # Faust's own topics (changelogs, leader), consumer groups and transactional ids.
        AclRule(
            SERVICE_USER,
            (("topic", app_id), ("group", app_id), ("transactional-id", app_id)),
            ("All",),
            pattern="prefixed",
        ),
        # Deny beats allow: the service reads keys but never writes them.
        AclRule(SERVICE_USER, (("topic", keys_topic),), ("Write",), permission="deny"),
        AclRule(CLIENT_USER, input_topics, ("Write", "Describe")),  # type: ignore[arg-type]
    ]
