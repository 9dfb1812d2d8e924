import pytest

from pipeline.recall.routing import (
    asks_current_value,
    asks_how_it_went,
    asks_latest,
    asks_when,
    classify,
    seeks_recency,
    speakers_named,
    without_time_cues,
)


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


@pytest.mark.parametrize(
    ("query", "current"),
    [
        ("Where do I live now?", True),
        ("What am I currently reading?", True),
        ("What do I drink these days?", True),
        ("Do I still play tennis?", True),
        ("Don't I eat meat anymore?", True),
        ("Which editor do I use at the moment?", True),
        ("我现在住在哪里？", True),
        ("我们目前用什么数据库？", True),
        ("我最近在读什么书？", True),
        ("你还喜欢喝咖啡吗？", True),
        ("What forum did Tim join recently?", False),  # an event, not a value that changed
        ("What new food places have I tried?", False),
        ("Where do I live?", False),
        ("你还记得我们去哪了吗？", False),  # "do you remember", not "still"
        ("我住在哪里？", False),
        # Kinds from the current-value probe (bench/current_value)
        ("what vit D dose have i landed on", True),
        ("What did Anthony end up playing during the charity event?", False),  # an event
        ("who's my trainer at this point in time", True),
        ("what's my current dentist", True),
        ("now我住哪里", True),  # an English cue written against Chinese
        ("我眼下在吃什么药？", True),
        ("我这会儿用的是哪个邮箱来着？", True),
        ("我手机号后来又换成啥了", True),
        ("我戒烟了没？", True),
        ("ipad我还在用嘛", True),
        ("What's the difference between AC and DC electric current?", False),  # the noun
        ("How strong was the current in the river?", False),
        ("Who are the members of the band Now United?", False),  # a name
        ("Who directed the movie Still Alice?", False),
        ("what did i say just now about the budget", False),  # a moment ago
        ("Did I still have the flu when I flew to Kyoto?", False),  # a past frame
        ("那天我妈还说了什么？", False),  # 还 as "also"; 么 of 什么
        ("我借小王的钱还了吗？", False),  # 还 as "repay"
        ("我最近一次献血是什么时候？", False),  # the newest instance, not a value now
        ("《当下的力量》是谁写的？", False),  # a title
    ],
)
def test_asks_current_value(query: str, current: bool) -> None:
    assert asks_current_value(query) is current


@pytest.mark.parametrize(
    ("query", "when"),
    [
        ("When did Caroline go to the support group?", True),
        ("What date is the launch?", True),
        ("Which year did we move?", True),
        ("How long ago was her birthday?", True),
        ("小雨什么时候开学？", True),
        ("我们是哪天上线的？", True),
        ("What did Caroline research?", False),
        ("Where do I live?", False),
        ("我住在哪里？", False),
    ],
)
def test_asks_when(query: str, when: bool) -> None:
    assert asks_when(query) is when


def test_speakers_named_by_full_or_first_name_whole_words() -> None:
    speakers = ["Caroline", "Melanie Brown", "user", "小雨"]
    assert speakers_named("What does Caroline like?", speakers) == ["Caroline"]
    assert speakers_named("What are melanie's hobbies?", speakers) == ["Melanie Brown"]
    assert speakers_named("Did Caroline and Melanie paint?", speakers) == [
        "Caroline",
        "Melanie Brown",
    ]
    assert speakers_named("What does Carolines' team do?", speakers) == []
    assert speakers_named("小雨什么时候开学？", speakers) == ["小雨"]
    assert speakers_named("what stack do we use", speakers) == []


def test_zuijin_alone_asks_what_holds_now_not_for_episodes() -> None:
    # "我最近在学什么？" is about these days: not routed to episodic memory alone.
    assert classify("我最近在学弹什么乐器？").route != "episodic" or (
        classify("我最近在学弹什么乐器？").confidence < 0.3
    )
    assert classify("最近三天我说了什么").route == "episodic"


def test_time_cues_are_no_keywords() -> None:
    assert without_time_cues("is rhodri still my boss?").split() == ["is", "rhodri", "my", "boss?"]
    assert "last" not in without_time_cues("What's the last book I read?")
    assert without_time_cues("我这阵子在学啥乐器？") == "我 在学啥乐器？"
    # The "still ... ?" construction of Chinese is a cue for the route, not removed as words.
    assert without_time_cues("我还在减肥吗？") == "我还在减肥吗？"


@pytest.mark.parametrize(
    ("query", "latest"),
    [
        ("What's the last film we watched?", True),
        ("What was my most recent trip?", True),
        ("我最后一次去医院是为了什么？", True),
        ("How did we fix that build failure last time?", False),  # the earlier occasion
        ("上次那个502的bug是怎么修的？", False),
        ("What's my last name?", False),
        ("What did we do last summer?", False),
        ("Where do I live now?", False),  # a current value, not an instance
    ],
)
def test_asks_latest(query: str, latest: bool) -> None:
    assert asks_latest(query) is latest
    # An instance is no value that changed: the earlier ones stay in the answer.
    assert not (latest and asks_current_value(query))


@pytest.mark.parametrize(
    ("query", "how_it_went"),
    [
        ("How did we fix the peer dependency conflict last time?", True),
        ("What did I end up doing that time the car was dead?", True),
        ("what did we do about the leak in the bathroom", True),
        ("热水器又报E1了 上次咋解决的", True),
        ("wifi断流那次怎么解决的", True),
        # A present how-to: the procedure itself is the answer.
        ("卤牛肉怎么做？", False),
        ("how do i reset the router?", False),
        # An event, not what was done about a situation.
        ("What did Caroline do for her birthday?", False),
        ("when did we fix the login bug", False),
    ],
)
def test_asks_how_it_went(query: str, how_it_went: bool) -> None:
    assert asks_how_it_went(query) is how_it_went
    # The engine passes the routing decision it already made: the same answer.
    assert asks_how_it_went(query, classify(query)) is how_it_went
