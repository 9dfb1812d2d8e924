import pytest

from pipeline.recall.routing import classify, seeks_recency


@pytest.mark.parametrize(
    ("query", "route"),
    [
        ("what did I say last week", "episodic"),
        ("when did we move the standup?", "episodic"),
        ("What happened with the launch yesterday?", "episodic"),
        ("上周我说了什么", "episodic"),
        ("我们什么时候上线的", "episodic"),
        ("三天前聊过的那个餐厅", "episodic"),
        ("what stack do we use", "semantic"),
        ("Which database do we prefer?", "semantic"),
        ("what's my favourite editor", "semantic"),
        ("我们用什么数据库", "semantic"),
        ("我喜欢什么颜色", "semantic"),
        ("how did we fix that bug", "procedural"),
        ("steps to deploy the api", "procedural"),
        ("How do I set up the VPN?", "procedural"),
        ("这个问题怎么解决", "procedural"),
        ("部署的步骤是什么", "procedural"),
        ("how did we fix the login bug last week", "procedural"),
    ],
)
def test_routes(query: str, route: str) -> None:
    decision = classify(query)
    assert decision.route == route, decision
    assert decision.confidence > 0.3
    assert decision.reason


def test_no_rule_means_zero_confidence() -> None:
    decision = classify("pineapple")
    assert decision.confidence == 0.0
    assert decision.reason == "no rule matched"


def test_mixed_evidence_lowers_confidence() -> None:
    clear = classify("steps to deploy the api")
    mixed = classify("when did we decide the steps to deploy")
    assert mixed.confidence < clear.confidence


@pytest.mark.parametrize(
    ("query", "recent"),
    [
        ("What new food places have I tried?", True),
        ("What am I currently reading?", True),
        ("Do I still live in Berlin?", True),
        ("我最近在看什么书？", True),
        ("When did Caroline go to the support group?", False),
        ("How was the trip to New York?", False),  # a name, not a cue
        ("我去过哪家拉面店？", False),
    ],
)
def test_seeks_recency(query: str, recent: bool) -> None:
    assert seeks_recency(query) is recent
