"""PII and secrets redaction: what is found, what must survive, placeholders, spans, reveal."""

from __future__ import annotations

import pytest

from pipeline.memory.rules.redaction import (
    RedactionPolicy,
    redact,
    reveal,
    reveal_placeholders,
)

# Valid by their checks (computed with the libraries once, written here as literals).
CN_ID = "11010519491231002X"  # the example everyone uses; checksum X
CN_ID_2 = "310115198511224567"
CARD_VISA = "4111 1111 1111 1111"
CARD_MC = "5555-5555-5555-4444"
CARD_AMEX = "378282246310005"
CARD_UNIONPAY = "6212345678901232"
IBAN_DE = "DE89 3704 0044 0532 0130 00"
IBAN_GB = "GB82WEST12345698765432"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


def _kinds(text: str, policy: RedactionPolicy | None = None) -> list[str]:
    result = redact(text, policy) if policy else redact(text)
    return [span.kind for span in result.spans]


# -- found --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mail me at alice.smith+work@example.co.uk tomorrow.", "Mail me at [EMAIL_1] tomorrow."),
        ("我的邮箱是 wang.wei@163.com，谢谢", "我的邮箱是 [EMAIL_1]，谢谢"),
        ("邮箱wang@example.cn是工作用的", "邮箱[EMAIL_1]是工作用的"),
        ("Call +44 20 7946 0958 after six.", "Call [PHONE_1] after six."),
        ("US office: +1 (650) 253-0000.", "US office: [PHONE_1]."),
        ("我的手机号是13800138000，随时联系", "我的手机号是[PHONE_1]，随时联系"),
        ("手机：+86 139-1234-5678", "手机：[PHONE_1]"),
        ("电话 138 0013 8000", "电话 [PHONE_1]"),
        (f"Card {CARD_VISA}, exp 12/27", "Card [CARD_1], exp 12/27"),
        (f"Mastercard {CARD_MC}.", "Mastercard [CARD_1]."),
        (f"amex {CARD_AMEX}", "amex [CARD_1]"),
        (f"银联卡号{CARD_UNIONPAY}", "银联卡号[CARD_1]"),
        (f"身份证号：{CN_ID}", "身份证号：[CN_ID_1]"),
        (f"ID {CN_ID.lower()} on file", "ID [CN_ID_1] on file"),
        (f"身份证{CN_ID_2}。", "身份证[CN_ID_1]。"),
        (f"IBAN {IBAN_DE} please", "IBAN [IBAN_1] please"),
        (f"pay to {IBAN_GB}", "pay to [IBAN_1]"),
        ("key sk-proj-abc123DEF456ghi789JKL012mno", "key [SECRET_1]"),
        ("export OPENAI_API_KEY=sk-abcdefghij1234567890ABCD", "export OPENAI_API_KEY=[SECRET_1]"),
        ("token ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "token [SECRET_1]"),
        ("aws AKIAIOSFODNN7EXAMPLE ok", "aws [SECRET_1] ok"),
        ("slack xoxb-123456789012-abcdefABCDEF", "slack [SECRET_1]"),
        (f"Authorization: Bearer {JWT}", "Authorization: Bearer [SECRET_1]"),
        ("password: hunter2hunter2", "password: [SECRET_1]"),
        ("数据库密码：Zx8!kq2#Lm", "数据库密码：[SECRET_1]"),
        ("the api key is 9f8e7d6c5b4a", "the api key is [SECRET_1]"),
        ("hs_0123456789ab_" + "Q" * 20 + "w" * 23, "[SECRET_1]"),
        ("random blob kJ8sL2mN9pQ4rT6vX1zB3dF5hK7wY0aC here", "random blob [SECRET_1] here"),
    ],
)
def test_detected_values_become_typed_placeholders(text: str, expected: str) -> None:
    assert redact(text).text == expected


# -- must survive -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "Order SF123456 shipped; tracking SF1234567890123.",
        "订单号SF123456已发货",
        "It costs $1,299.99 or ¥8999, 20% off.",
        "Upgrade to v2.13.4 (build 20240501) then 3.11.7.",
        "Meeting on 2024-05-01 at 10:00, room 1203.",
        "会议定在2024年5月1日下午3点，在1203会议室",
        "commit 3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e fixed it",
        "request id 123e4567-e89b-12d3-a456-426614174000",
        "See https://docs.example.com/guides/getting-started/installation for details.",
        "Internationalization_and_localization_are_hard words",
        "We use PostgreSQL 16 and Python 3.12 on Kubernetes 1.30.",
        "The ISBN is 978-3-16-148410-0.",
        "call extension 4411 or room 555",
        "temperature 36.6, pressure 120/80",
        "The passwords policy changed last week.",  # a secret word with nothing after it
        "我的电话号码变了",
    ],
)
def test_ordinary_text_survives(text: str) -> None:
    result = redact(text)
    assert result.text == text and not result.spans, result


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Card 4111 1111 1111 1112", "Luhn fails"),
        ("Card 9123456789012348", "Luhn passes but no network issues 9..."),
        ("Card 4111 1111-1111 1111", "mixed separators"),
        ("身份证号：11010519491231002Y", "check digit wrong"),
        ("身份证号：110105194912310021", "check digit wrong (digit)"),
        ("身份证号：440306199002301235", "February 30th, checksum right"),
        ("身份证号：440306180003071232", "born in 1800"),
        ("IBAN DE89 3704 0044 0532 0130 01", "mod-97 fails"),
        ("IBAN DE89 3704 0044 0532 0130", "too short for Germany"),
        ("手机号1280013800", "10 digits"),
        ("号码12800138000", "starts 12: not a mobile prefix"),
        ("code 138001380001", "12 digits: not a mobile"),
        ("Call +44 20 79", "too short to be valid"),
        ("sk-short", "too short to be a key"),
        ("eyJnb3QiOiJ5b3UifQ.eyJub3QiOiJhIGp3dCJ9.c2lnbmF0dXJl", "no alg/typ header"),
        ("AKIAIOSFODNN7EXAMPL", "19 characters"),
        ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1A", "long but low entropy"),
    ],
)
def test_near_misses_survive(text: str, why: str) -> None:
    assert redact(text).text == text, why


# -- numbering, spans, reveal -------------------------------------------------------------------
def test_numbering_is_stable_within_a_text() -> None:
    text = (
        "Write to bob@example.com or carol@example.com; bob@example.com is faster. "
        "Phones: 13800138000, +86 138 0013 8000 (the same), 13912345678."
    )
    result = redact(text)
    assert result.text == (
        "Write to [EMAIL_1] or [EMAIL_2]; [EMAIL_1] is faster. "
        "Phones: [PHONE_1], [PHONE_1] (the same), [PHONE_2]."
    )
    assert result.counts() == {"EMAIL": 3, "PHONE": 3}


def test_spans_point_into_both_texts_and_hold_no_values() -> None:
    text = f"我是王伟，手机13800138000，邮箱wang@example.cn，身份证{CN_ID}。"
    result = redact(text)
    assert [s.kind for s in result.spans] == ["PHONE", "EMAIL", "CN_ID"]
    for span in result.spans:
        assert result.text[span.redacted_start : span.redacted_end] == span.placeholder
        assert span.value_in(text) in text
        assert span.value_in(text) not in repr(span)
    assert reveal(result, text) == text


def test_reveal_leaves_a_literal_placeholder_typed_by_the_user() -> None:
    text = "Literal [EMAIL_1] and real a@b.io"
    result = redact(text)
    assert result.text == "Literal [EMAIL_1] and real [EMAIL_1]"
    assert reveal(result, text) == text


def test_reveal_placeholders_in_derived_content() -> None:
    text = "My number is 13800138000 and my mail is x@y.com"
    result = redact(text)
    memory = "User's phone: [PHONE_1]; email [EMAIL_1]"
    assert reveal_placeholders(memory, result, text) == "User's phone: 13800138000; email x@y.com"


def test_overlaps_resolve_to_one_placeholder() -> None:
    # An email whose local part is a phone number, a key with digits, an ID with a card prefix.
    assert redact("13800138000@qq.com").text == "[EMAIL_1]"
    assert redact("sk-1380013800013800138000abc").text == "[SECRET_1]"
    # 6212... with a valid ID checksum and date is an ID, not a UnionPay card.
    assert _kinds(f"62010219900307123{_cn_check('62010219900307123')}") == ["CN_ID"]


def _cn_check(first17: str) -> str:
    from stdnum.cn import ric

    return str(ric.calc_check_digit(first17 + "0"))


def test_policy_selects_kinds_and_the_phone_region() -> None:
    text = "mail a@b.io, call (650) 253-0000, card 4111111111111111"
    emails_only = RedactionPolicy(kinds=frozenset({"EMAIL"}))
    assert (
        redact(text, emails_only).text
        == "mail [EMAIL_1], call (650) 253-0000, card 4111111111111111"
    )
    assert "(650) 253-0000" in redact(text).text  # national format: needs a region
    assert redact(text, RedactionPolicy(phone_region="US")).text == (
        "mail [EMAIL_1], call [PHONE_1], card [CARD_1]"
    )


def test_empty_and_whitespace_text() -> None:
    assert redact("").text == "" and redact("   \n").spans == ()


def test_redaction_is_deterministic() -> None:
    text = f"a@b.io {CARD_VISA} {JWT} 13800138000"
    assert redact(text) == redact(text)
