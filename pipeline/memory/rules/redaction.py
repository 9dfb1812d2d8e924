"""PII and secrets redaction: typed placeholders before extraction and embedding (pure, no I/O).

``redact(text, policy)`` finds emails, phone numbers, payment cards, Chinese resident ID numbers,
IBANs and API keys/tokens, and returns the text with typed placeholders (``[EMAIL_1]``,
``[PHONE_2]`` ...) plus the spans replaced. Numbering is stable within one text: the same value
gets the same placeholder every time it appears, in order of first appearance per type.

A span records where the value was in the original and where its placeholder is in the result,
never the value itself, so spans can travel with the redacted text; an admin who can read the
original turn (the log) gets the values back with ``reveal``.

Checks come from well-kept libraries, not hand-written: ``phonenumbers`` (Google's libphonenumber
metadata) validates international numbers, ``python-stdnum`` does Luhn, IBAN mod-97 with the
country lengths, and the Chinese resident ID's ISO 7064 MOD 11-2 check digit and birth date.
What is ours is only the candidate patterns and which match wins when two overlap.

False positives are the enemy of memory quality: every detector validates before it redacts.
Order numbers (``SF123456``), prices, dates, version numbers, git hashes and UUIDs survive.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import get_args

import orjson
import phonenumbers
from stdnum import iban as stdnum_iban
from stdnum import luhn
from stdnum.cn import ric as stdnum_cn_ric

from schemas.events import CommandIssued, InputEvent, TurnRecorded
from schemas.policy import NamespacePolicies, PiiKind, PolicyEntry, RedactionSettings

PII_KINDS: tuple[PiiKind, ...] = get_args(PiiKind)
# When two candidates overlap, the earlier kind here wins (then the longer match): a token that
# contains digits is a secret, not a phone number; an 18-digit ID is not a card.
_PRIORITY = {kind: rank for rank, kind in enumerate(PII_KINDS)}


@dataclass(frozen=True)
class RedactionPolicy:
    """What to redact. ``phone_region`` (ISO 3166 code, e.g. ``"US"``) also matches national
    formats of that region; without it only international numbers (``+44 ...``) and Chinese
    mobiles are phone numbers."""

    kinds: frozenset[PiiKind] = field(default_factory=lambda: frozenset(PII_KINDS))
    phone_region: str | None = None


DEFAULT_POLICY = RedactionPolicy()


@dataclass(frozen=True)
class Span:
    kind: PiiKind
    start: int  # in the original text
    end: int
    placeholder: str
    redacted_start: int  # where the placeholder sits in the redacted text
    redacted_end: int

    def value_in(self, original: str) -> str:
        return original[self.start : self.end]


@dataclass(frozen=True)
class Redacted:
    text: str
    spans: tuple[Span, ...]

    @property
    def changed(self) -> bool:
        return bool(self.spans)

    def counts(self) -> dict[PiiKind, int]:
        return dict(Counter(span.kind for span in self.spans))


@dataclass(frozen=True)
class _Candidate:
    kind: PiiKind
    start: int
    end: int


# -- detectors: each yields validated candidates ------------------------------------------------
_EMAIL = re.compile(
    # ASCII boundaries: in Chinese text an address often follows a character directly (邮箱a@b.cn).
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![A-Za-z0-9-])"
)


def _emails(text: str) -> Iterator[_Candidate]:
    for match in _EMAIL.finditer(text):
        yield _Candidate("EMAIL", match.start(), match.end())


# 11 digits 1[3-9]..., optionally +86/0086 and separated 3-4-4 by a space or hyphen.
_CN_MOBILE = re.compile(r"(?<![\d+])(?:(?:\+|00)86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}(?!\d)")


def _phones(text: str, region: str | None) -> Iterator[_Candidate]:
    for match in _CN_MOBILE.finditer(text):
        yield _Candidate("PHONE", match.start(), match.end())
    # libphonenumber finds and validates numbers; without a region only +international ones.
    for found in phonenumbers.PhoneNumberMatcher(
        text, region, leniency=phonenumbers.Leniency.VALID
    ):
        yield _Candidate("PHONE", found.start, found.end)


# 13-19 digits, in one group or in groups split by single spaces or hyphens.
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")


def _card_brand_ok(digits: str) -> bool:
    """Lengths and prefixes (IIN ranges) that issuing networks use: Luhn alone passes 1 in 10
    random numbers, so a long order number must not be taken for a card."""
    n, two, four, six = len(digits), int(digits[:2]), int(digits[:4]), int(digits[:6])
    return (
        (digits[0] == "4" and n in (13, 16, 19))  # Visa
        or ((51 <= two <= 55 or 2221 <= four <= 2720) and n == 16)  # Mastercard
        or (two in (34, 37) and n == 15)  # American Express
        or (two == 62 and 16 <= n <= 19)  # UnionPay
        or ((four == 6011 or two == 65 or 644 <= int(digits[:3]) <= 649) and n in (16, 19))
        or (3528 <= four <= 3589 and 16 <= n <= 19)  # JCB
        or ((two in (36, 38, 39) or 300 <= int(digits[:3]) <= 305) and 14 <= n <= 19)  # Diners
        or (two in (50, 56, 57, 58, 63, 67) and 12 <= n <= 19 and six > 0)  # Maestro
    )


def _cards(text: str) -> Iterator[_Candidate]:
    for match in _CARD.finditer(text):
        raw = match.group()
        separators = set(re.sub(r"\d", "", raw))
        if len(separators) > 1:
            continue  # "4111 1111-1111 1111": not how a card is written
        digits = re.sub(r"\D", "", raw)
        if _card_brand_ok(digits) and luhn.is_valid(digits):
            yield _Candidate("CARD", match.start(), match.end())


_CN_ID = re.compile(r"(?<![0-9A-Za-z])[1-9]\d{16}[\dXx](?![0-9A-Za-z])")


def _valid_cn_id(number: str) -> bool:
    """Check digit (ISO 7064 MOD 11-2) and a real birth date, both from python-stdnum.

    Not the region: stdnum's county table would also refuse real IDs from counties it lacks,
    and a missed ID is worse than redacting a number that only looks like one.
    """
    if number[-1] != stdnum_cn_ric.calc_check_digit(number):
        return False
    try:
        born = stdnum_cn_ric.get_birth_date(number)
    except ValueError:  # stdnum's InvalidComponent is a ValueError
        return False
    return 1900 <= born.year <= 2100


def _cn_ids(text: str) -> Iterator[_Candidate]:
    for match in _CN_ID.finditer(text):
        if _valid_cn_id(match.group().upper()):
            yield _Candidate("CN_ID", match.start(), match.end())


_IBAN = re.compile(
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"
)


def _ibans(text: str) -> Iterator[_Candidate]:
    for match in _IBAN.finditer(text):
        if stdnum_iban.is_valid(match.group()):  # mod 97 and the country's length and format
            yield _Candidate("IBAN", match.start(), match.end())


# Well-known key formats (their prefixes exist so that scanners can find them).
_KNOWN_SECRETS = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"sk-(?:proj-|ant-|live-)?[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic and look-alikes
    r"|gh[pousr]_[A-Za-z0-9]{36,255}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{22,255}"
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|hs_[0-9a-f]{12}_[A-Za-z0-9_-]{43}"  # our own API keys
    r")(?![A-Za-z0-9_-])"
)
_JWT = re.compile(
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{8,}(?![A-Za-z0-9_-])"
)
# `password: hunter2`, `api_key=...`, `密码：...`: the value after a secret-naming word.
_LABELLED_SECRET = re.compile(
    r"(?i)(?:api[_ -]?key|secret|token|password|passwd|pwd|密码|密钥|令牌|口令)"
    r"[\"']?\s*(?:[:=：]|\bis\b)\s*[\"']?(?P<value>[^\s\"',;，。；]{6,})"
)
# Long runs of base64/url-safe characters with high entropy: random tokens, not words or ids.
_OPAQUE = re.compile(r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_-]{32,}={0,2}(?![A-Za-z0-9+/_=-])")
OPAQUE_MIN_BITS_PER_CHAR = 4.2  # hex (<= 4.0: hashes, UUIDs) stays; base64 randomness (~5) goes


def _is_jwt(token: str) -> bool:
    header = token.split(".", 1)[0]
    try:
        decoded = orjson.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (binascii.Error, orjson.JSONDecodeError, ValueError):
        return False
    return isinstance(decoded, dict) and ("alg" in decoded or "typ" in decoded)


def _bits_per_char(token: str) -> float:
    counts = Counter(token)
    return -sum(c / len(token) * math.log2(c / len(token)) for c in counts.values())


def _looks_random(token: str) -> bool:
    classes = (
        any(c.islower() for c in token),
        any(c.isupper() for c in token),
        any(c.isdigit() for c in token),
    )
    return all(classes) and _bits_per_char(token) >= OPAQUE_MIN_BITS_PER_CHAR


def _secrets(text: str) -> Iterator[_Candidate]:
    for match in _KNOWN_SECRETS.finditer(text):
        yield _Candidate("SECRET", match.start(), match.end())
    for match in _JWT.finditer(text):
        if _is_jwt(match.group()):
            yield _Candidate("SECRET", match.start(), match.end())
    for match in _LABELLED_SECRET.finditer(text):
        yield _Candidate("SECRET", match.start("value"), match.end("value"))
    for match in _OPAQUE.finditer(text):
        if _looks_random(match.group().rstrip("=")):
            yield _Candidate("SECRET", match.start(), match.end())


# -- resolution and substitution -----------------------------------------------------------------
def _candidates(text: str, policy: RedactionPolicy) -> list[_Candidate]:
    found: list[_Candidate] = []
    if "SECRET" in policy.kinds:
        found += _secrets(text)
    if "EMAIL" in policy.kinds:
        found += _emails(text)
    if "CN_ID" in policy.kinds:
        found += _cn_ids(text)
    if "CARD" in policy.kinds:
        found += _cards(text)
    if "IBAN" in policy.kinds:
        found += _ibans(text)
    if "PHONE" in policy.kinds:
        found += _phones(text, policy.phone_region)
    return found


def _resolve(candidates: list[_Candidate]) -> list[_Candidate]:
    """Non-overlapping spans: higher-priority kinds first, then longer, then earlier."""
    chosen: list[_Candidate] = []
    for candidate in sorted(
        candidates, key=lambda c: (_PRIORITY[c.kind], -(c.end - c.start), c.start)
    ):
        if all(candidate.end <= c.start or candidate.start >= c.end for c in chosen):
            chosen.append(candidate)
    return sorted(chosen, key=lambda c: c.start)


def redact(text: str, policy: RedactionPolicy = DEFAULT_POLICY) -> Redacted:
    """``text`` with every detected value replaced by its typed placeholder."""
    chosen = _resolve(_candidates(text, policy))
    numbers: dict[tuple[PiiKind, str], str] = {}
    per_kind: Counter[PiiKind] = Counter()
    parts: list[str] = []
    spans: list[Span] = []
    cursor = 0
    length = 0
    for candidate in chosen:
        value = text[candidate.start : candidate.end]
        key = (candidate.kind, _normalised(candidate.kind, value))
        if key not in numbers:
            per_kind[candidate.kind] += 1
            numbers[key] = f"[{candidate.kind}_{per_kind[candidate.kind]}]"
        placeholder = numbers[key]
        before = text[cursor : candidate.start]
        parts += [before, placeholder]
        length += len(before)
        spans.append(
            Span(
                candidate.kind,
                candidate.start,
                candidate.end,
                placeholder,
                length,
                length + len(placeholder),
            )
        )
        length += len(placeholder)
        cursor = candidate.end
    parts.append(text[cursor:])
    return Redacted("".join(parts), tuple(spans))


def _normalised(kind: PiiKind, value: str) -> str:
    """The same value written two ways ("138 0013 8000", "13800138000") is one placeholder."""
    if kind in ("PHONE", "CARD", "IBAN"):
        return re.sub(r"[^0-9A-Za-z]", "", value).upper().removeprefix("0086").removeprefix("86")
    if kind in ("EMAIL", "CN_ID"):
        return value.lower()
    return value


def reveal(redacted: Redacted, original: str) -> str:
    """The original text back from the redacted one and its spans (for an admin with the log).

    Only placeholders at the recorded positions are replaced, so a literal "[EMAIL_1]" typed by
    a user elsewhere in the text is left as it was.
    """
    out: list[str] = []
    cursor = 0
    for span in sorted(redacted.spans, key=lambda s: s.redacted_start):
        out.append(redacted.text[cursor : span.redacted_start])
        out.append(span.value_in(original))
        cursor = span.redacted_end
    out.append(redacted.text[cursor:])
    return "".join(out)


def reveal_placeholders(content: str, redacted: Redacted, original: str) -> str:
    """Replace placeholders in derived text (a memory's content, not the turn itself) with the
    values they stand for in ``original``: an extracted memory may quote ``[PHONE_1]`` anywhere.
    """
    values = {span.placeholder: span.value_in(original) for span in redacted.spans}
    if not values:
        return content
    pattern = re.compile("|".join(re.escape(p) for p in sorted(values, key=len, reverse=True)))
    return pattern.sub(lambda m: values[m.group()], content)


def policy_in_force(
    history: NamespacePolicies | None, partition: int, offset: int
) -> RedactionPolicy | None:
    """The redaction in force for an input at ``(partition, offset)``: the last policy set
    before it on its partition, or None when redaction is off there."""
    if history is None:
        return None
    current: RedactionSettings | None = None
    for entry in history.entries:
        if entry.partition == partition and entry.offset < offset:
            current = entry.redaction
    if current is None or not current.enabled:
        return None
    return RedactionPolicy(kinds=frozenset(current.kinds), phone_region=current.phone_region)


def with_policy(
    history: NamespacePolicies | None,
    namespace: str,
    partition: int,
    offset: int,
    event_id: str,
    settings: RedactionSettings,
) -> NamespacePolicies:
    """The history with a ``set_policy`` at ``(partition, offset)`` in it (idempotent)."""
    entries = list(history.entries) if history is not None else []
    if any(e.partition == partition and e.offset == offset for e in entries):
        return history or NamespacePolicies(namespace=namespace, entries=entries)
    entries.append(
        PolicyEntry(partition=partition, offset=offset, event_id=event_id, redaction=settings)
    )
    entries.sort(key=lambda e: (e.partition, e.offset))
    return NamespacePolicies(namespace=namespace, entries=entries)


@dataclass(frozen=True)
class PolicyStep:
    """What one input event does under the namespace policies, in log order."""

    event: InputEvent  # the turn with placeholders when it was redacted, else as it came
    history: NamespacePolicies | None = None  # the new history when the event set a policy
    redacted: Redacted | None = None  # what was replaced in a turn


def policy_step(
    event: InputEvent,
    partition: int,
    offset: int,
    book: Mapping[str, NamespacePolicies],
) -> PolicyStep:
    """A ``set_policy`` joins its namespace's history; a turn under an enabled policy gets its
    values replaced by placeholders — before anything extracts, embeds or stores it."""
    if isinstance(event, CommandIssued) and event.redaction is not None:
        history = with_policy(
            book.get(event.namespace),
            event.namespace,
            partition,
            offset,
            event.event_id,
            event.redaction,
        )
        return PolicyStep(event, history=history)
    if isinstance(event, TurnRecorded):
        policy = policy_in_force(book.get(event.namespace), partition, offset)
        if policy is not None:
            redacted = redact(event.text, policy)
            if redacted.changed:
                return PolicyStep(event.model_copy(update={"text": redacted.text}), None, redacted)
    return PolicyStep(event)


def step_in_log_order(
    event: InputEvent, partition: int, offset: int, book: dict[str, NamespacePolicies]
) -> PolicyStep:
    """``policy_step``, with a joined history written back into ``book`` — so the events after it
    in the same batch are read under the policy it set (every reader of the log folds this way)."""
    step = policy_step(event, partition, offset, book)
    if step.history is not None:
        book[step.history.namespace] = step.history
    return step
