"""Filter stage: what is remembered, as which kind, in which region, with what base importance."""

from __future__ import annotations

import pytest

from pipeline.memory.rules.classify import BASE_IMPORTANCE, classify, is_small_talk, region_for
from schemas.memory import KINDS

SMALL_TALK = [
    "hi",
    "thanks!",
    "lol ok",
    "Hi there! Good morning.",
    "Hello everyone",
    "ok, sounds good",
    "Great, thanks!",
    "haha ok cool, thanks so much",
    "how are you?",
    "Good night!",
    "你好",
    "哈哈好的，谢谢",
    "嗯嗯",
    "好的好的",
    "谢谢，再见！",
    "收到，没问题",
]


@pytest.mark.parametrize("text", SMALL_TALK)
def test_small_talk_is_not_remembered(text: str) -> None:
    decision = classify(text)

    assert is_small_talk(text)
    assert decision.remember is False
    assert decision.kind == "chit_chat"
    assert decision.base_importance == 0.2


@pytest.mark.parametrize(
    "text",
    [
        "hi, we use MySQL for billing",
        "thanks! the fix was to restart the worker",
        "ok, my favorite color is blue",
        "你好，我喜欢用 Vim",
        "Hi, I live in Berlin",
    ],
)
def test_greetings_around_content_do_not_hide_it(text: str) -> None:
    assert not is_small_talk(text)
    assert classify(text).remember is True


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # preference
        ("I prefer dark mode", "preference"),
        ("I really like short answers", "preference"),
        ("I don't like Java", "preference"),
        ("my favorite color is blue", "preference"),
        ("Please always use metric units", "preference"),
        ("我喜欢用 Vim", "preference"),
        ("我讨厌冗长的会议", "preference"),
        # decision
        ("we moved from MySQL to PostgreSQL", "decision"),
        ("We decided to ship on Fridays only", "decision"),
        ("From now on all code should be written in TypeScript", "decision"),
        ("Let's use Redis for caching", "decision"),
        ("以后所有代码都用 TypeScript", "decision"),
        ("我们决定改用 PostgreSQL", "decision"),
        # procedure
        ("the fix was to restart the worker", "procedure"),
        ("To fix it, clear the cache and redeploy", "procedure"),
        ("First, stop the service, then run the migration", "procedure"),
        ("解决方法：先清理缓存，然后重新部署", "procedure"),
        ("部署步骤写在 wiki 上", "procedure"),
        # task state
        ("I'm working on the billing migration", "task_state"),
        ("The release deadline is Friday", "task_state"),
        ("We are blocked on the security review", "task_state"),
        ("我正在写季度报告", "task_state"),
        ("下一步是把服务迁到 Kubernetes", "task_state"),
        # emotion
        ("I'm so stressed about the launch", "emotion"),
        ("I feel anxious about the interview", "emotion"),
        ("我最近压力很大", "emotion"),
        ("今天很开心", "emotion"),
        # fact (the default)
        ("The office is in the city center", "fact"),
        ("We use MySQL for the billing database", "fact"),
        ("I live in Berlin", "fact"),
        ("Alice is our tech lead", "fact"),
        ("我住在北京", "fact"),
    ],
)
def test_kind_of_clear_examples(text: str, kind: str) -> None:
    decision = classify(text)

    assert decision.remember is True
    assert decision.kind == kind, decision.reason
    assert decision.base_importance == BASE_IMPORTANCE[decision.kind]
    assert decision.reason


def test_base_importance_table_follows_the_seeds() -> None:
    assert BASE_IMPORTANCE["preference"] == 0.9
    assert BASE_IMPORTANCE["task_state"] == 0.85
    assert BASE_IMPORTANCE["fact"] == 0.7
    assert BASE_IMPORTANCE["procedure"] == 0.65
    assert BASE_IMPORTANCE["emotion"] == 0.5
    assert BASE_IMPORTANCE["chit_chat"] == 0.2
    # Not in the seeds: a decision binds later turns like the task it concerns.
    assert BASE_IMPORTANCE["decision"] == 0.85
    assert set(BASE_IMPORTANCE) == set(KINDS)


@pytest.mark.parametrize(
    ("text", "importance"),
    [
        ("I prefer dark mode", 0.9),
        ("I'm working on the billing migration", 0.85),
        ("The office is in the city center", 0.7),
        ("the fix was to restart the worker", 0.65),
        ("I'm so stressed about the launch", 0.5),
        ("hi", 0.2),
    ],
)
def test_classification_carries_the_base_importance(text: str, importance: float) -> None:
    assert classify(text).base_importance == importance


@pytest.mark.parametrize(
    ("text", "region"),
    [
        ("the fix was to restart the worker", "procedural"),
        ("解决方法：先清理缓存，然后重新部署", "procedural"),
        ("I prefer dark mode", "semantic"),
        ("我喜欢用 Vim", "semantic"),
        ("we moved from MySQL to PostgreSQL", "semantic"),
        ("The office is in the city center", "semantic"),
        ("I'm so stressed about the launch", "episodic"),
        ("我最近压力很大", "episodic"),
        ("I'm working on the billing migration", "episodic"),
        ("我正在写季度报告", "episodic"),
        # A fact about something that happened is an episode, not timeless knowledge.
        ("Yesterday we visited the museum", "episodic"),
        ("昨天我们去了博物馆", "episodic"),
    ],
)
def test_region_of_clear_examples(text: str, region: str) -> None:
    assert classify(text).region == region


def test_region_rules_by_kind() -> None:
    assert region_for("procedure", "anything") == "procedural"
    assert region_for("preference", "yesterday I liked tea") == "semantic"
    assert region_for("decision", "we decided last week") == "semantic"
    assert region_for("emotion", "I'm happy") == "episodic"
    assert region_for("task_state", "working on it") == "episodic"
    assert region_for("fact", "The sky is blue") == "semantic"
    assert region_for("fact", "We met Bob last week") == "episodic"


def test_classification_is_deterministic() -> None:
    texts = ["I prefer dark mode", "以后所有代码都用 TypeScript", "hi", "The office is far"]

    assert [classify(t) for t in texts] == [classify(t) for t in texts]


@pytest.mark.parametrize(
    "text",
    [
        "please forget my home address",
        "hey, could you please forget that",
        "can you delete what I said about my ex?",
        "I want you to forget my ID number",
        "no need to store this",
        "请把我的身份证号忘掉，不该发给你的。",
        "忘掉我的家庭住址",
        "帮我把刚才那条删了",
        "这个不用记了",
        "把那个地址忘了吧",
    ],
)
def test_a_request_to_forget_is_not_remembered(text: str) -> None:
    decision = classify(text)
    assert not decision.remember
    assert decision.reason == "a request to forget"


@pytest.mark.parametrize(
    "text",
    [
        "I always forget my keys on Mondays",
        "don't forget to call my mum on Sunday",
        "I had to remove my wisdom teeth last year",
        "I'll never forget the day my youngest took her first steps",
        "fix 是把 node_modules 删掉再 npm install",
        "蓝牙耳机连不上电脑那个问题搞定了 在设置里把设备删掉 重新配对一下就好了",
        "我忘记带钥匙了，只好等我妈回来",
        "我把微信删了，太占时间",
        "忘了说，我下周出差去成都",
    ],
)
def test_the_same_verbs_said_of_oneself_are_no_request(text: str) -> None:
    assert classify(text).reason != "a request to forget"
