"""Filter stage: should a turn be remembered, and as what kind of memory?

Rule-based and deterministic, English and Chinese. The seeds' base importance per kind is the
default table; ``decision`` is not in the seeds and sits with task state, since a decision (a
stack change, a rule "from now on …") is as binding for later turns as the task it concerns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from pipeline.memory.rules.text import language_of, normalise
from schemas.memory import Kind, Region

BASE_IMPORTANCE: dict[Kind, float] = {
    "preference": 0.9,
    "task_state": 0.85,
    "decision": 0.85,
    "fact": 0.7,
    "procedure": 0.65,
    "emotion": 0.5,
    "chit_chat": 0.2,
}

_EN_RULES: list[tuple[Kind, re.Pattern[str]]] = [
    (
        "decision",
        re.compile(
            r"\b(we|i|let'?s|team)\s+(have\s+)?(decided|agreed|chose|choose|picked|settled on|"
            r"will go with|are going with|moved|switched|migrated|standardi[sz]ed)\b|"
            r"\bfrom now on\b|\bgoing forward\b|\bfrom here on\b|\bno more\b|"
            r"\b(let'?s|we'?ll|we will) (use|stick with|switch to|move to)\b",
            re.I,
        ),
    ),
    (
        "procedure",
        re.compile(
            r"\b(to fix (it|this|that)|fixed (it|this|that) by|the fix (was|is)|workaround|"
            r"solved (it|this|that) by|resolved (it|this|that) by|the solution (was|is)|"
            r"steps? (are|is|to)|step \d|first,? .{1,80}\bthen\b|how to\b|run `|"
            r"you (need|have) to (run|set|restart|install|configure)|in order to)",
            re.I,
        ),
    ),
    (
        "preference",
        re.compile(
            r"\b(i|we)\s+(really\s+|much\s+|strongly\s+|always\s+)?(prefer|like|love|enjoy|"
            r"hate|dislike|adore|can'?t stand|don'?t like|do not like|would rather)\b|"
            r"\b(my|our) favou?rite\b|\bi'?m (a (big|huge) )?fan of\b|\bi'?m into\b|"
            r"\b(please )?(always|never) (use|do|write|call)\b",
            re.I,
        ),
    ),
    (
        "task_state",
        re.compile(
            r"\b(i'?m|we'?re|i am|we are)\s+(currently\s+)?(working on|in the middle of|"
            r"about to|planning to|trying to|preparing|busy with)\b|"
            r"\b(todo|to-do|deadline|due (on|by|date)|blocked (on|by)|next step|"
            r"in progress|pending|milestone|sprint|release)\b|"
            r"\b(finished|completed|done with|shipped|submitted)\b",
            re.I,
        ),
    ),
    (
        "emotion",
        re.compile(
            r"\b(i|we)\s+(feel|felt|am feeling|was feeling)\b|"
            r"\b(i'?m|i am|i was|i've been|we'?re)\s+(so\s+|really\s+|very\s+|super\s+)?"
            r"(happy|sad|stressed|anxious|excited|worried|frustrated|angry|upset|tired|"
            r"thrilled|proud|nervous|scared|grateful|overwhelmed|lonely|relieved|exhausted)\b",
            re.I,
        ),
    ),
]

_ZH_RULES: list[tuple[Kind, re.Pattern[str]]] = [
    (
        "decision",
        re.compile(
            r"决定|以后(都|统一|所有|全部)|从现在(开始|起)|今后|改用|换成|迁移到|统一(用|使用)|不再用"
        ),
    ),
    (
        "procedure",
        re.compile(
            r"步骤|先.{0,30}(然后|再)|解决(方法|办法|方案)|修复|是这样(解决|修)的|执行|命令|操作方法|怎么(做|配置)"
        ),
    ),
    ("preference", re.compile(r"喜欢|偏好|更愿意|讨厌|最爱|习惯(用|于)|倾向于|请(总是|一直|不要)")),
    (
        "task_state",
        re.compile(r"正在|进行中|待办|截止|完成了|做完|卡在|下一步|计划|里程碑|上线|发布"),
    ),
    (
        "emotion",
        re.compile(r"开心|高兴|难过|伤心|焦虑|压力|生气|沮丧|兴奋|担心|累了|激动|失望|感动"),
    ),
]

# Turns made only of these carry nothing to remember.
_EN_SMALL_TALK = re.compile(
    r"\b(hi|hello|hey|hiya|yo|thanks|thank you|thx|ty|ok|okay|k|sure|lol|lmao|haha+|hehe|"
    r"bye|goodbye|good night|good morning|good evening|see you|see ya|cya|cool|great|nice|awesome|"
    r"yeah|yep|yup|yes|no|nope|got it|sounds good|you too|np|no problem|welcome|you're welcome|"
    r"alright|right|wow|oh|ah|hmm|mhm|indeed|totally|exactly|same|me too|for sure|of course|"
    r"how are you|how's it going|what's up|take care|cheers|glad to hear|good to see you|"
    r"nice to meet you|talk soon|catch you later)\b",
    re.I,
)
_ZH_SMALL_TALK = re.compile(
    r"你好|您好|嗨|哈喽|谢谢|多谢|感谢|哈+|嘿嘿|呵呵|好的|好吧|嗯+|哦+|啊+|拜拜|再见|晚安|早上好|早安|"
    r"晚上好|收到|没问题|不客气|好滴|行|可以|对|是的|没事|辛苦了|明白|了解"
)
_NOISE = re.compile(r"[\W_\d]+", re.UNICODE)
# Words that only pad a greeting ("hi there", "thanks so much, it is great").
_FILLER = frozenset(
    [
        "there",
        "everyone",
        "everybody",
        "guys",
        "all",
        "folks",
        "buddy",
        "man",
        "dude",
        "again",
        "so",
        "much",
        "very",
        "really",
        "too",
        "good",
        "day",
        "morning",
        "night",
        "evening",
        "afternoon",
        "it",
        "is",
        "it's",
        "that",
        "this",
        "a",
        "the",
        "to",
        "you",
        "i",
        "am",
        "me",
        "we",
        "pretty",
        "well",
        "and",
        "just",
        "for",
        "your",
        "a",
        "lot",
    ]
)
_PAST_EVENT = re.compile(
    r"\b(yesterday|last (week|month|year|night|weekend|time)|ago|went|visited|met|attended|"
    r"started|joined|took|bought|gave|got|had|saw|made|did|was|were)\b|昨天|上周|上个月|去年|刚才|前天|那天",
    re.I,
)


# Requests about memory itself ("please forget my address") are commands, not memories: storing
# them would keep the very text the user wants gone, and they would outrank the target on recall.
# Only a request addressed to the listener counts: a clause that opens with the verb, or with a
# polite opener before it ("can you delete …", 请/麻烦/帮我 …忘掉); a verb of not keeping (别记,
# "don't store"); or 把 … 忘掉 with no first person before 把. Said of oneself, the same verbs
# tell facts and steps that must be kept: "I always forget my keys", 我忘记带钥匙了, "don't
# forget to call my mum", 在设置里把设备删掉 重新配对.
_CLAUSE_START = r"(?:^|[.!?;,:\n]\s*|\b(?:and|so|also|btw|ok|okay|hey|oh|just|actually)\s+)"
_ASKING = (
    r"(?:(?:please|pls|plz|kindly)\s+|(?:can|could|would|will) you\s+(?:please\s+)?|"
    r"i (?:want|need|'d like|would like) you to\s+)?"
)
_FORGET_REQUEST = re.compile(
    _CLAUSE_START
    + _ASKING
    + r"(?:(?:forget|delete|erase|remove|wipe|scrub)\b(?!\s+(?:to|about it)\b).{0,40}?"
    r"\b(?:my|our|that|this|it|everything|what i (?:said|told|mentioned))\b"
    r"|(?:don'?t|do not|stop|no need to)\s+(?:remember|stor|sav|keep|record)\w*\b)"
    r"|(?:请|麻烦|帮我|你|您|能不能)[^。！？!?\n]{0,12}?"
    r"(?:忘掉|忘了|忘记|删掉|删了|删除|抹掉|别记|不要记)"
    r"|(?<![我他她])把[^。！？!?\n]{0,15}?忘(?:掉|了)"
    r"|(?:别|不要|不用|无需|不必)再?(?:记|存|保存|记录)(?![错得仇性账])"
    r"|(?:^|[，,。.！!？?;；\s])(?:忘掉|忘记)(?!说|告诉|提)[^。！？!?\n]{0,12}?(?:我|刚才|之前|那|这)"
    r"|删除[^。！？!?\n]{0,10}?(?:我的|记录|信息|记忆)",
    re.I,
)
# Assistant pleasantries and sign-offs that carry no fact.
_SIGN_OFF = re.compile(
    r"^\W*(?:(?:hello|hi|hey|ok|okay|alright|sure|great|thanks|thank you|bye)\W+)*"
    r"(how (can|may) i (help|assist)( you)?( today)?|what can i do for you|"
    r"anything else( i can help with)?|let me know if .{0,40}|"
    r"see you (tomorrow|later|soon|next time)|"
    r"talk (to you )?(tomorrow|later|soon)|have a (good|great|nice) (day|one|night|weekend))\W*$|"
    r"^\W*(你好|您好)?\W*(有什么(可以|能)帮(你|您)的|还有(什么|别的)需要|明天见|回头见|下次见)\W*$",
    re.I,
)
# Health, safety and hard constraints outweigh ordinary facts (an allergy must survive noise).
_CRITICAL = re.compile(
    r"\b(allerg\w*|intoleran\w*|diabet\w*|asthma|medication|blood type|emergency contact|"
    r"never (use|do|give|eat)|must not|must never|password|pin code)\b|"
    r"过敏|不耐受|糖尿病|哮喘|药物|血型|"
    r"紧急联系人|绝对不(能|要)|千万不要|密码",
    re.I,
)
CRITICAL_FACT_IMPORTANCE = 0.9
# Words not said by the user (the assistant's reply, a tool's output) are kept, for audit and for
# "what did you suggest?", but they are second-hand about the user's world: the assistant's "Their
# bakery is popular for a reason" must not outrank the user's "been doing the big shop at Lidl"
# for "where do I get my groceries?". They weigh what the seeds give small talk.
SECOND_HAND_IMPORTANCE = BASE_IMPORTANCE["chit_chat"]


@dataclass(frozen=True)
class Classification:
    kind: Kind
    region: Region
    base_importance: float
    remember: bool
    reason: str


def strip_small_talk(text: str) -> str:
    """``text`` (normalised) with its greetings, thanks, acknowledgements and laughter blanked."""
    stripped = _EN_SMALL_TALK.sub(" ", normalise(text))
    stripped = _ZH_SMALL_TALK.sub(" ", stripped)
    return re.sub(r"[啦呀吧呢哈嘛哦噢的了]", " ", stripped)


def has_small_talk(text: str) -> bool:
    """True when ``text`` has a greeting, thanks, acknowledgement or laughter in it."""
    folded = normalise(text)
    return bool(_EN_SMALL_TALK.search(folded) or _ZH_SMALL_TALK.search(folded))


def is_small_talk(text: str) -> bool:
    """True when nothing but greetings, thanks, acknowledgements or laughter remains."""
    residue = [
        word for word in _NOISE.sub(" ", strip_small_talk(text)).split() if word not in _FILLER
    ]
    return not residue


def region_for(kind: Kind, text: str) -> Region:
    if kind == "procedure":
        return "procedural"
    if kind in {"task_state", "emotion"}:
        return "episodic"
    if kind == "fact" and _PAST_EVENT.search(text):
        return "episodic"
    return "semantic"


def importance_said_by(importance: float, role: str) -> float:
    """The importance of a turn said in ``role``: anything but the user's own words is kept at
    ``SECOND_HAND_IMPORTANCE`` at most, whoever (rules or an LLM) scored it."""
    return importance if role == "user" else min(importance, SECOND_HAND_IMPORTANCE)


def as_said_by(decision: Classification, role: str) -> Classification:
    """``decision`` for a turn said in ``role`` (``importance_said_by``)."""
    if role == "user" or not decision.remember:
        return decision
    importance = importance_said_by(decision.base_importance, role)
    reason = f"{decision.reason}; said by {role}"
    return replace(decision, base_importance=importance, reason=reason)


def not_remembered(reason: str) -> Classification:
    return Classification("chit_chat", "episodic", BASE_IMPORTANCE["chit_chat"], False, reason)


def decided(text: str, kind: Kind, reason: str) -> Classification:
    """A remembered turn of a decided kind, after the exact rules that hold whoever decided it.

    A request to forget is never stored; health, safety and hard constraints get at least the
    critical importance; the region follows from the kind (and a past event for a fact).
    """
    if _FORGET_REQUEST.search(text):
        return not_remembered("a request to forget")
    importance = BASE_IMPORTANCE[kind]
    critical = _CRITICAL.search(text)
    if critical and importance < CRITICAL_FACT_IMPORTANCE:
        importance = CRITICAL_FACT_IMPORTANCE
        reason += f"; critical {critical.group(0)!r}"
    return Classification(kind, region_for(kind, text), importance, True, reason)


def classify(text: str) -> Classification:
    """Decide should-remember and the kind, with the seeds' base importance."""
    if is_small_talk(text) or _SIGN_OFF.search(text.strip()):
        return not_remembered("small talk")
    if _FORGET_REQUEST.search(text):
        return not_remembered("a request to forget")
    primary = _ZH_RULES if language_of(text) == "zh" else _EN_RULES
    # Mixed-language turns: the other language's rules are tried second.
    secondary = _EN_RULES if primary is _ZH_RULES else _ZH_RULES
    kind: Kind = "fact"
    reason = "default: fact"
    for kind_rule, pattern in [*primary, *secondary]:
        match = pattern.search(text)
        if match:
            kind, reason = kind_rule, f"matched {match.group(0)!r}"
            break
    return decided(text, kind, reason)
