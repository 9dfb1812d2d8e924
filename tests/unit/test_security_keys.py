"""API keys and scopes: the grammar, matching, the key format, the fold, authentication."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.security import hashing
from pipeline.security.keys import (
    UNAUTHENTICATED,
    AuthenticationFailed,
    Forbidden,
    Principal,
    apply_key_event,
    usable,
)
from pipeline.security.ring import KeyRing, KeyRingUnavailable
from pipeline.security.scopes import Scope, ScopeError, is_global_admin, parse_scope, permits
from pipeline.security.tokens import MalformedKey, format_key, new_key_id, new_secret, parse_key
from schemas.codec import encode
from schemas.errors import InvalidEvent
from schemas.keys import KeyCreated, KeyRevoked, ScopeGrant, decode_key_event

T0 = datetime(2025, 1, 1, tzinfo=UTC)


# -- scope grammar ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "pattern", "actions"),
    [
        ("team-a:*:recall,retain", "team-a:*", {"recall", "retain"}),
        ("*:admin", "*", {"admin"}),
        ("alice:recall", "alice", {"recall"}),
        ("team-a:alice:forget", "team-a:alice", {"forget"}),
        (" team-a:* : recall , erase ", "team-a:* ", None),  # spaces inside the pattern: refused
        ("user@example.com:retain", "user@example.com", {"retain"}),
        ("t*:recall", "t*", {"recall"}),
    ],
)
def test_parse_scope(text: str, pattern: str, actions: set[str] | None) -> None:
    if actions is None:
        with pytest.raises(ScopeError):
            parse_scope(text)
        return
    scope = parse_scope(text)
    assert scope.pattern == pattern and scope.actions == actions


@pytest.mark.parametrize(
    ("text", "mentions"),
    [
        ("recall", "PATTERN:ACTIONS"),
        (":recall", "PATTERN:ACTIONS"),
        ("team-a:*:", "action"),
        ("team-a:*:read", "'read'"),
        ("team-*-x:recall", "only allowed at the end"),
        ("*a:recall", "only allowed at the end"),
        ("te?m:recall", "namespace"),
        ("team[a]:recall", "namespace"),
        ("-team:recall", "namespace"),
        ("x" * 129 + ":recall", "namespace"),
        ("**:recall", "only allowed at the end"),
    ],
)
def test_bad_scopes_name_what_is_wrong(text: str, mentions: str) -> None:
    with pytest.raises(ScopeError) as caught:
        parse_scope(text)
    assert mentions in str(caught.value)


def test_scope_round_trips_through_its_text_and_grant() -> None:
    scope = parse_scope("team-a:*:retain,recall")
    assert str(scope) == "team-a:*:retain,recall"
    assert parse_scope(str(scope)) == scope
    assert Scope.from_grant(scope.grant()) == scope


@pytest.mark.parametrize(
    ("scope", "namespace", "action", "allowed"),
    [
        ("*:recall", "anyone", "recall", True),
        ("*:recall", "anyone", "retain", False),
        ("team-a:*:recall", "team-a:alice", "recall", True),
        ("team-a:*:recall", "team-a:bob:notes", "recall", True),
        ("team-a:*:recall", "team-a", "recall", False),  # the prefix is "team-a:", not "team-a"
        ("team-a:*:recall", "team-ab:alice", "recall", False),
        ("team-a:*:recall", "team-b:alice", "recall", False),
        ("team-a*:recall", "team-ab", "recall", True),
        ("alice:recall", "alice", "recall", True),
        ("alice:recall", "alice2", "recall", False),
        ("alice:recall", "Alice", "recall", False),  # namespaces are case-sensitive
        ("alice:admin", "alice", "erase", True),  # admin implies every action
        ("alice:admin", "alice", "retain", True),
        ("alice:admin", "bob", "recall", False),  # ... only where it applies
        ("alice:erase", "alice", "forget", False),  # erase does not imply forget: explicit grants
        ("alice:forget", "alice", "erase", False),
    ],
)
def test_permits(scope: str, namespace: str, action: str, allowed: bool) -> None:
    assert permits([parse_scope(scope)], namespace, action) is allowed  # type: ignore[arg-type]


def test_permits_is_the_union_of_scopes_and_nothing_without_scopes() -> None:
    scopes = [parse_scope("team-a:*:recall"), parse_scope("team-b:bob:retain")]
    assert permits(scopes, "team-a:x", "recall")
    assert permits(scopes, "team-b:bob", "retain")
    assert not permits(scopes, "team-b:bob", "recall")
    assert not permits([], "anything", "recall")


def test_global_admin_is_admin_over_star_only() -> None:
    assert is_global_admin([parse_scope("*:admin")])
    assert not is_global_admin([parse_scope("team-a:*:admin")])
    assert not is_global_admin([parse_scope("*:recall,retain,forget,erase")])
    assert UNAUTHENTICATED.is_admin


def test_forbidden_never_names_the_namespace() -> None:
    principal = Principal("abcdef012345", "ci", (parse_scope("team-a:*:recall"),))
    principal.require("team-a:alice", "recall")
    with pytest.raises(Forbidden) as caught:
        principal.require("secret-project:carol", "recall")
    assert "secret-project" not in str(caught.value) and "carol" not in str(caught.value)
    assert "abcdef012345" in str(caught.value) and "recall" in str(caught.value)


# -- key format ------------------------------------------------------------------------------
def test_key_format_round_trips_and_hides_the_secret() -> None:
    key_id, secret = new_key_id(), new_secret()
    token = format_key(key_id, secret)
    assert token.startswith(f"hs_{key_id}_") and len(token) == 3 + 12 + 1 + 43
    presented = parse_key(token)
    assert presented.key_id == key_id and presented.secret == secret
    assert secret not in repr(presented)


def test_new_secrets_are_distinct_and_long() -> None:
    secrets = {new_secret() for _ in range(200)}
    assert len(secrets) == 200 and all(len(s) == 43 for s in secrets)


@pytest.mark.parametrize(
    "token",
    [
        "",
        "hs_",
        "sk-abcdef",
        "hs_ABCDEF012345_" + "a" * 43,  # upper-case id
        "hs_abcdef01234_" + "a" * 43,  # 11-digit id
        "hs_abcdef012345_" + "a" * 42,  # short secret
        "hs_abcdef012345_" + "a" * 42 + "=",  # padding is not in the alphabet
        "Bearer hs_abcdef012345_" + "a" * 43,
    ],
)
def test_malformed_keys_are_refused_without_echo(token: str) -> None:
    with pytest.raises(MalformedKey) as caught:
        parse_key(token)
    if len(token) > 8:
        assert token not in str(caught.value)


# -- events and the fold ---------------------------------------------------------------------
def _created(key_id: str, scopes: list[str], secret_hash: str = "$argon2id$placeholder-hash",
             **extra: object) -> KeyCreated:  # fmt: skip
    return KeyCreated(
        event_id=f"e-{key_id}",
        key_id=key_id,
        name="ci",
        scopes=[parse_scope(s).grant() for s in scopes],
        secret_hash=secret_hash,
        created_at=T0,
        **extra,  # type: ignore[arg-type]
    )


def _revoked(key_id: str) -> KeyRevoked:
    return KeyRevoked(event_id=f"r-{key_id}", key_id=key_id, revoked_at=T0 + timedelta(days=1))


def test_key_events_round_trip_through_the_codec() -> None:
    created = _created("abcdef012345", ["team-a:*:recall"], expires_at=T0 + timedelta(days=30))
    assert decode_key_event(encode(created)) == created
    revoked = _revoked("abcdef012345")
    assert decode_key_event(encode(revoked)) == revoked


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (b"[1]", None),
        (b'{"event_type": "TurnRecorded", "schema_version": 2}', "event_type"),
        (b'{"event_type": "KeyCreated", "schema_version": 9}', "schema_version"),
        (
            b'{"event_type": "KeyRevoked", "schema_version": 1, "event_id": "x", '
            b'"key_id": "NOT-HEX", "revoked_at": "2025-01-01T00:00:00+00:00"}',
            "key_id",
        ),
        (
            b'{"event_type": "KeyRevoked", "schema_version": 1, "event_id": "x", '
            b'"key_id": "abcdef012345", "revoked_at": "2025-01-01T00:00:00"}',
            "revoked_at",
        ),
    ],
)
def test_bad_key_events_name_the_field(payload: bytes, field: str | None) -> None:
    with pytest.raises(InvalidEvent) as caught:
        decode_key_event(payload)
    assert caught.value.field == field


def test_fold_creates_revokes_and_keeps_what_a_revoked_key_was() -> None:
    state = apply_key_event({}, _created("abcdef012345", ["team-a:*:recall"]))
    assert state["abcdef012345"].status == "active"
    assert usable(state["abcdef012345"], T0) is None
    after = apply_key_event(state, _revoked("abcdef012345"))
    assert state["abcdef012345"].status == "active"  # the input is not changed
    record = after["abcdef012345"]
    assert record.status == "revoked" and record.secret_hash is None
    assert record.name == "ci" and str(record.scopes[0]) == "team-a:*:recall"
    assert "revoked" in (usable(record, T0) or "")


def test_fold_of_a_compacted_topic_equals_the_fold_of_its_history() -> None:
    """Compaction keeps only the revocation; the key must still be revoked, with its name."""
    revocation = KeyRevoked(
        event_id="r", key_id="abcdef012345", name="ci",
        scopes=[parse_scope("team-a:*:recall").grant()], revoked_at=T0,
    )  # fmt: skip
    full = apply_key_event(apply_key_event({}, _created("abcdef012345", ["team-a:*:recall"])),
                           revocation)  # fmt: skip
    compacted = apply_key_event({}, revocation)
    for state in (full, compacted):
        record = state["abcdef012345"]
        assert record.status == "revoked" and record.name == "ci"
        assert [str(s) for s in record.scopes] == ["team-a:*:recall"]


def test_expired_and_unknown_keys_are_not_usable() -> None:
    state = apply_key_event(
        {}, _created("abcdef012345", ["*:recall"], expires_at=T0 + timedelta(hours=1))
    )
    record = state["abcdef012345"]
    assert usable(record, T0 + timedelta(minutes=59)) is None
    assert "expired" in (usable(record, T0 + timedelta(hours=1)) or "")
    assert usable(None, T0) == "unknown key id"


def test_a_stored_scope_that_breaks_the_grammar_makes_the_key_unusable() -> None:
    bad = KeyCreated(
        event_id="e", key_id="abcdef012345", secret_hash="$argon2id$placeholder-hash",
        scopes=[ScopeGrant(pattern="te*am", actions=["recall"])], created_at=T0,
    )  # fmt: skip
    record = apply_key_event({}, bad)["abcdef012345"]
    assert record.status == "invalid" and record.scopes == ()
    assert "invalid scope" in (usable(record, T0) or "")


# -- hashing and the verified cache ----------------------------------------------------------
def test_argon2id_hash_verifies_only_its_secret() -> None:
    encoded = hashing.hash_secret("right")
    assert encoded.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert hashing.verify_secret("right", encoded)
    assert not hashing.verify_secret("wrong", encoded)
    assert not hashing.verify_secret("right", "$argon2id$garbage")
    assert hashing.hash_secret("right") != encoded  # salted


def test_verified_cache_remembers_hits_misses_and_forgets_on_revoke() -> None:
    cache = hashing.VerifiedCache()
    good, bad = cache.digest("k", "good"), cache.digest("k", "bad")
    assert cache.lookup("k", good) is None
    cache.remember("k", good, True)
    cache.remember("k", bad, False)
    assert cache.lookup("k", good) is True and cache.lookup("k", bad) is False
    assert cache.lookup("other", good) is None
    cache.forget("k")
    assert cache.lookup("k", good) is None and cache.lookup("k", bad) is None
    assert hashing.VerifiedCache().digest("k", "good") != good  # a per-process key


def test_failed_digests_are_bounded_per_key() -> None:
    cache = hashing.VerifiedCache()
    for i in range(hashing.MAX_FAILED_PER_KEY + 10):
        cache.remember("k", cache.digest("k", f"guess-{i}"), False)
    assert cache.lookup("k", cache.digest("k", "guess-0")) is None  # evicted, oldest first
    assert cache.lookup("k", cache.digest("k", f"guess-{hashing.MAX_FAILED_PER_KEY + 9}")) is False


# -- the ring's authenticate -----------------------------------------------------------------
@pytest.fixture(scope="module")
def issued() -> tuple[str, str, str]:
    key_id, secret = new_key_id(), new_secret()
    return key_id, format_key(key_id, secret), hashing.hash_secret(secret)


def _ring(*events: KeyCreated | KeyRevoked) -> KeyRing:
    ring = KeyRing()
    for event in events:
        ring.apply(event)
    ring.ready = True
    return ring


async def test_authenticate_accepts_the_key_and_returns_its_scopes(
    issued: tuple[str, str, str],
) -> None:
    key_id, token, secret_hash = issued
    ring = _ring(_created(key_id, ["team-a:*:recall"], secret_hash))
    principal = await ring.authenticate(token, T0)
    assert principal.key_id == key_id and principal.permits("team-a:x", "recall")
    assert (await ring.authenticate(token, T0)) == principal  # cached path, same answer


@pytest.mark.parametrize("case", ["missing", "malformed", "unknown", "wrong", "revoked", "expired"])
async def test_authenticate_refuses(issued: tuple[str, str, str], case: str) -> None:
    key_id, token, secret_hash = issued
    events: list[KeyCreated | KeyRevoked] = [
        _created(key_id, ["*:recall"], secret_hash, expires_at=T0 + timedelta(days=1))
    ]
    presented: str | None = token
    now = T0
    if case == "missing":
        presented = None
    elif case == "malformed":
        presented = "not-a-key"
    elif case == "unknown":
        presented = format_key(new_key_id(), new_secret())
    elif case == "wrong":
        presented = format_key(key_id, new_secret())
    elif case == "revoked":
        events.append(_revoked(key_id))
    elif case == "expired":
        now = T0 + timedelta(days=2)
    ring = _ring(*events)
    with pytest.raises(AuthenticationFailed) as caught:
        await ring.authenticate(presented, now)
    assert str(caught.value) == AuthenticationFailed.PUBLIC_MESSAGE  # details stay in the logs


async def test_revocation_beats_the_cache(issued: tuple[str, str, str]) -> None:
    key_id, token, secret_hash = issued
    ring = _ring(_created(key_id, ["*:recall"], secret_hash))
    await ring.authenticate(token, T0)  # now cached
    ring.apply(_revoked(key_id))
    with pytest.raises(AuthenticationFailed):
        await ring.authenticate(token, T0)


async def test_a_wrong_secret_is_verified_once_then_refused_from_the_cache(
    issued: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key_id, _, secret_hash = issued
    ring = _ring(_created(key_id, ["*:recall"], secret_hash))
    calls = 0
    real = hashing.verify_secret

    def counting(secret: str, encoded: str) -> bool:
        nonlocal calls
        calls += 1
        return real(secret, encoded)

    monkeypatch.setattr("pipeline.security.ring.verify_secret", counting)
    guess = format_key(key_id, new_secret())
    for _ in range(3):
        with pytest.raises(AuthenticationFailed):
            await ring.authenticate(guess, T0)
    assert calls == 1


async def test_a_ring_that_failed_or_is_loading_answers_unavailable(
    issued: tuple[str, str, str],
) -> None:
    _, token, _ = issued
    loading = KeyRing()
    with pytest.raises(KeyRingUnavailable):
        await loading.authenticate(token, T0)
    failed = _ring()
    failed.failure = "KafkaConnectionError: broker gone"
    with pytest.raises(KeyRingUnavailable) as caught:
        await failed.authenticate(token, T0)
    assert "broker gone" in str(caught.value)


async def test_concurrent_first_requests_all_succeed(issued: tuple[str, str, str]) -> None:
    key_id, token, secret_hash = issued
    ring = _ring(_created(key_id, ["*:recall"], secret_hash))
    principals = await asyncio.gather(*(ring.authenticate(token, T0) for _ in range(8)))
    assert {p.key_id for p in principals} == {key_id}


# -- exposure: no auth is for loopback only -------------------------------------------------
@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    from pipeline.interfaces.auth import is_loopback

    assert is_loopback(host) is loopback


def test_check_exposure_refuses_only_non_loopback_without_auth() -> None:
    from pipeline.interfaces.auth import check_exposure
    from schemas.errors import HindsightError

    check_exposure("0.0.0.0", auth=True)
    check_exposure("127.0.0.1", auth=False)
    with pytest.raises(HindsightError, match=r"refusing to listen on 0\.0\.0\.0"):
        check_exposure("0.0.0.0", auth=False)


def test_ring_lists_keys_oldest_first_and_revocation_only_keys_last() -> None:
    ring = _ring(
        _created("bbbbbbbbbbbb", ["*:recall"]),
        KeyRevoked(event_id="r1", key_id="cccccccccccc", revoked_at=T0),
        KeyRevoked(event_id="r2", key_id="aaaaaaaaaaaa", revoked_at=T0),
    )
    assert [r.key_id for r in ring.records()] == ["bbbbbbbbbbbb", "aaaaaaaaaaaa", "cccccccccccc"]
