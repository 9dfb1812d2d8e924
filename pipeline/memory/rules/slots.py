"""Updates by slot: does a newer statement give an older one's subject and attribute a new value?

Two halves, both pure:

* ``slot_of(text)`` (run by ``prepare``) finds the statement's *value spans* — numbers (digits
  and Chinese numerals, with their units left in place), identifiers, e-mail addresses, quoted
  titles, named things, technology names and task-state words (planned / in progress / done,
  English and Chinese) — and the *frame*: the statement with those spans masked, whose words
  say which slot it is about. A slot is compared by the statement's own vector
  (``slot_vector``); a frame vector recorded by an earlier build is still read.
* ``slot_update(older, newer, policy)`` (run by ``consolidate``) decides from the two records'
  slot signals, their kinds and their speakers whether the newer one supersedes the older.

The rule (docs/UPDATES.md has the measurements behind each threshold):

1. Same subject: the same speaker said both.
2. The older statement is *stateful*: a preference, decision, task state or a fact that is not a
   past event. A past event ("had lunch with Tom at X yesterday") stays true when another event
   follows; a state that moved on (a task in progress, a stated habit) does not. An older
   statement carrying a task state (planned / in progress) is stateful even if told as an event.
3. Neither is a procedure, an emotion or small talk, and the newer one is not additive ("also",
   "too", 也, 另外): a second hobby is not a contradiction. Questions state no value.
4. Same slot: the statements are close (``slot_cosine``), or their frames share enough content
   words (``slot_term_overlap``) with a cosine above a floor.
5. Different value: each side has a value the other lacks (a substitution, not an elaboration),
   and the two do not name two different subjects (both sides name things, share none, and more
   than one value changed on each side: "Anna is 34" / "Ben is 36" are two people).

"Rather miss a conflict than invent one": every condition has to hold.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from difflib import SequenceMatcher

import jieba
import jieba.posseg
import numpy as np
import numpy.typing as npt

from pipeline.memory.rules.attribute_chance import one_attribute
from pipeline.memory.rules.extraction import _STOP_CAPITALS, _TECH_PATTERN
from pipeline.memory.rules.text import cjk_ratio, language_of, normalise
from pipeline.recall.lexical import tokenize
from pipeline.runtime.settings import MemoryPolicy
from schemas.memory import Kind, Region, Slot, Triplet
from schemas.prepared import decode_vector

MASK = "…"
Vector = npt.NDArray[np.float32]


def slot_vector(slot: Slot | None, statement_vector: Vector | None) -> Vector | None:
    """The vector a statement's slot is compared by: the statement's own.

    Builds before 2026-12-03 embedded the frame (the statement with its values masked) as a
    second text, which doubled the encoder's work; on the update pairs the statement's own vector
    decides every pair alike (docs/UPDATES.md, "One encoder pass per statement"). A frame vector
    recorded in an older event is still the one read, so its replay decides as it did.
    """
    if slot is None:
        return None
    if slot.vector_b64 is not None:
        return decode_vector(slot.vector_b64)
    return statement_vector


jieba.setLogLevel(logging.WARNING)
# jieba's part-of-speech tags for names: people, places, organisations, other proper nouns.
# ("nz", other proper nouns, is left out: jieba gives it to common words such as 论文.)
_ZH_NAME_TAGS = frozenset({"nr", "nrt", "nrfg", "ns", "nt"})
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")

# -- value spans -------------------------------------------------------------------------------

_CN_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10_000, "亿": 100_000_000}
_CN_NUMERAL = "零〇一二两三四五六七八九十百千万亿"
# A numeral standing alone: 百, 千, 万 and 亿 are numbers only after a digit (一千, 三万), alone
# they begin words (千层, 百货, 万一).
_CN_LONE_NUMERAL = "零〇一二两三四五六七八九十"
# What may follow a Chinese numeral for it to count as a number (so 一般, 一直, 统一 do not).
_CN_COUNTED = (
    "点|岁|个|次|块|元|号|月|日|章|分钟|分|小时|天|周|年|公里|公斤|斤|步|寸|人|位|节|层|楼|栋|倍|米|"
    "本|张|只|条|件|台|辆|间|套|兆|G|g|万|千|百|"
    # the rest of the common measure words (grammar, not phrasing): 三顿, 十秒, 两杯, 五趟
    "秒|顿|遍|趟|回|杯|碗|瓶|罐|盒|包|袋|双|对|份|种|门|所|名|口|片|粒|颗|根|支|把|串|集|部|首|"
    "篇|页|行|圈|站|户|辆|架|艘|匹|头|升|毫升|毫克|微克|克|千克|厘米|毫米|度|折|成"
)
_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.])[$£€¥]?\d{1,3}(?:,\d{3})+(?:\.\d+)?[kKmM]?(?![A-Za-z0-9])"
    r"|(?<![A-Za-z0-9_.])[$£€¥]?\d+(?:[.:]\d+)?(?:[kK](?![A-Za-z0-9]))?"
    # A digit before 百 / 千 / 万 / 亿 makes a number whatever follows (一百二以上, 两万五到账).
    r"|第?[一二两三四五六七八九][百千万亿][" + _CN_NUMERAL + r"]*"
    r"|第?[" + _CN_NUMERAL + r"]{2,}(?:(?=" + _CN_COUNTED + r")|(?![\u4e00-\u9fff]))"
    r"|第?[" + _CN_LONE_NUMERAL + r"](?=" + _CN_COUNTED + r")"
)
# Parts of a whole, told as grammar: 四分之三 (0.75), 百分之三十 (30, a percentage),
# 一片半 / 一个半小时 (1.5); "3/4 of a cup", "1/2 tsp", "a dozen".
_CN_FRACTION = re.compile(r"([" + _CN_NUMERAL + r"]+)分之([" + _CN_NUMERAL + r"]+|\d+)")
_CN_HALF = re.compile(r"([" + _CN_LONE_NUMERAL + r"]{1,3}|\d+)(个|" + _CN_COUNTED + r")半")
_FRACTION = re.compile(
    r"(?<![\d/])(\d{1,2})/(\d{1,2})(?![\d/])(?=\s*(?:of\b|cups?\b|tsp\b|tbsp\b|teaspoons?\b"
    r"|tablespoons?\b|tablets?\b|pills?\b|miles?\b|lbs?\b|kg\b|inch|hours?\b|an?\b))",
    re.IGNORECASE,
)
_DOZEN = re.compile(r"\b(?:a )?dozen\b", re.IGNORECASE)
# Not read as amounts, though they are ones: a lone 半 or "half a" (半年, "half a day"), "once" /
# "twice", and 一 as the amount of a rate (每晚一集). They are mostly the rate or the duration
# beside a slot's value ("twice a week", 每晚一集 next to the story told), and an extra amount on
# one side makes the update rule read two values changed: measured on the tuning half, where
# each lost an update (docs/BENCHMARKS.md, "Values nobody tuned on").


# A clause that supposes or asks rather than tells ("if it ships on time", "no idea whether it
# was approved", 假如下个月上线的话, 要是贷款能批下来): a task state inside it does not hold.
_HYPOTHETICAL = re.compile(
    r"\b(?:if|unless|whether|hypothetically)\b[^,.;!?]*"
    r"|(?:如果|假如|假设|要是|若是|万一|是否|能不能|会不会)[^，。,；;！!？?]*",
    re.IGNORECASE,
)


def _fraction_value(numerator: str, denominator: str) -> str | None:
    top = int(numerator) if numerator.isdigit() else chinese_number(numerator)
    bottom = chinese_number(denominator)
    if top is None or not bottom:
        return None
    return f"{top:g}" if bottom == 100 else f"{top / bottom:g}"


# A time of day told in words: 七点四十 (7:40), 八点半 (8:30), 9点15分; the same value as "7:40".
_CN_CLOCK = re.compile(
    r"([" + _CN_NUMERAL + r"]{1,3}|\d{1,2})点(半|[" + _CN_NUMERAL + r"]{1,3}|\d{1,2})?(?:分|刻)?"
)
_IDENTIFIER = re.compile(
    r"(?<![A-Za-z0-9_.])\d+(?:\.\d+){2,}(?![A-Za-z0-9_])"  # addresses, versions: 10.8.0.12
    r"|(?<![A-Za-z0-9_])(?=[A-Za-z0-9._@#-]*[A-Za-z])(?=[A-Za-z0-9._@#-]*\d)"
    r"[A-Za-z0-9][A-Za-z0-9._@#-]*[A-Za-z0-9](?![A-Za-z0-9_])"
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
    r"|(?<![A-Za-z0-9_])[A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)+(?![A-Za-z0-9_])"
)
# An amount with its unit written on (90s, 10mg, 200ms, 16GB, 420k) or a clock time (10am, 7pm):
# a number, not an identifier, so "30 seconds" and "90s" are values of one class.
_MEASURE = re.compile(
    r"(?<![A-Za-z0-9_.#@-])(\d+(?:\.\d+)?)(am|pm|AM|PM|[a-z%]{1,3}|[KMGT]B|K)"
    r"(?![A-Za-z0-9_@-]|\.\w)"
)
# Amounts told in words ("Mia is five", "twenty-five minutes"). "One" is left out: far more
# often a pronoun ("the only one I open") than an amount.
_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_NUMBER_WORDS = {
    **{word: value for value, word in enumerate(_ONES) if word != "one"},
    **{word: 10 * (index + 2) for index, word in enumerate(_TENS)},
}
_UNIT_WORDS = "|".join(_ONES[1:10])
_NUMBER_WORD = re.compile(
    rf"\b(?:(?P<tens>{'|'.join(_TENS)})[- ](?P<unit>{_UNIT_WORDS})"
    rf"|(?P<word>{'|'.join(_NUMBER_WORDS)}))\b",
    re.I,
)
_WEEKDAY_ZH = re.compile(r"(?<!每)(?:周|星期|礼拜)([一二三四五六日天])(?![次个回遍天])")
_WEEKDAYS = "一二三四五六日"
_ORDINAL = re.compile(r"(?<![A-Za-z0-9])(\d+)(?:st|nd|rd|th)(?![A-Za-z0-9])", re.I)
_RELATIVE_TIME = re.compile(
    r"\b(?:(?:next|this|last|coming) (?:week|weekend|month|year|spring|summer|autumn|fall|"
    r"winter|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|tomorrow|tonight|today|"
    r"yesterday|in the (?:spring|summer|autumn|fall|winter|morning|evening))\b"
    r"|下个?月|下周|下星期|明天|后天|今年|明年|去年|今天|昨天|上个?月|上周|月底|年底|月初|年初",
    re.I,
)
_CALENDAR_WORDS = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ]
)
_QUOTED = re.compile(r"[\"“「『《]([^\"“”「」『』《》]{1,40})[\"”」』》]")
# Capitalised words with a lower-case letter: names, not acronyms (CI, PR, BP name attributes).
_CAPITALISED = re.compile(r"(?<![A-Za-z0-9_'’])[A-Z][a-z][A-Za-z]*(?:[ -][A-Z][a-z][A-Za-z]*)*")
# A person named by surname and title (刘医生, 王老师, 陈经理), as people are usually called; the
# common surnames, and titles that cannot start another word (总 and 工 can: 周总结, 加工).
_ZH_SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程苏"
    "魏吕丁任沈姚卢姜崔钟谭陆汪范金廖贾夏韦付方白邹孟熊秦邱尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵严覃"
    "武戴莫孔汤"
)
_ZH_TITLED_NAME = re.compile(
    r"[老小]?[" + _ZH_SURNAMES + r"]"
    r"(?:医生|大夫|老师|经理|总监|师傅|律师|教练|主任|阿姨|叔叔|老板|教授)"
)
_ASCII_WORD_IN_CJK = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z][A-Za-z+#]*(?![A-Za-z0-9_])")

# Task states on one scale; the words are values (what the state is), not cues for an update.
_STATES_EN: tuple[tuple[str, str], ...] = (
    (
        "planned",
        # ("plan to Mint Mobile" is a phone plan: a name after "plan to" makes it a noun.)
        r"plan(?:s|ned|ning)? (?:to(?!\s+(?-i:[A-Z]))|for|on)|going to|"
        r"thinking (?:of|about)|about to|"
        r"intend(?:s|ed)? to|hoping to|scheduled (?:for|to)|starts?(?= next| on| in| tomorrow)|"
        r"not started|to-?do",
    ),
    (
        "in_progress",
        r"working on|in progress|ongoing|under ?way|halfway|half done|drafting|"
        r"in draft|in (?:\w+ )?review|under (?:\w+ )?review|started|starting|began|"
        r"still (?:looking|waiting|working|doing|at|in|with|on)|"
        r"waiting (?:for|to|on)|pending|in the middle of|running now|unblocked|"
        r"on week|on chapter|at week|at chapter|"
        # something ordered or applied for, not here yet
        r"on order|on its way|on their way|on the way|in transit|on (?:the|a) waiting list",
    ),
    ("blocked", r"blocked|stuck|on hold|paused"),
    (
        "done",
        r"done|finished|completed?|shipped|merged|submitted|sent (?:off|out)|mailed|"
        r"approved|signed|arrived|delivered|launched|released|went live|is live|closed|fixed|"
        r"resolved|discharged|passed|accepted|got the offer|handed in|wrapped up|over and done|"
        # what was ordered or arranged has come: "the laptops landed", "cabin's booked"
        r"landed|came through|went through|booked|all set",
    ),
)
_STATES_ZH: tuple[tuple[str, str], ...] = (
    ("planned", r"计划|打算|准备(?!好)|将要|预计|还没开始|待办"),
    (
        "in_progress",
        r"正在|在?(?:进行|办理|测试|审核|处理|开发|装修|评审|排队|运输|配送)中|在办|"
        r"在写|在做|在等|等待|评审|做到一半|"
        r"开工|开始|还没有?(?=[\u4e00-\u9fff])|"  # 还没发货, 还没考: not yet, so under way
        r"在路上|在运输|在排队",
    ),
    ("blocked", r"卡在|卡住|搁置|暂停"),
    (
        "done",
        r"完成|做完|写完|完工|搞定|上线|发布了|合进|合并了|下来了|批下来|拿到|过了|"
        r"通过了|递交了|提交了|交了|定稿|搬完|结束了|结项|办好了|办完|"
        r"到了(?=[！!。，,～~]|$)|"  # 按摩椅到了！: arrived, as "arrived" above
        # a verb with its result reached: 装好了, 弄好了, 办好了 (not 好多了, 就好了)
        r"(?:装|弄|办|修|做|写|订|搞|收拾|整理|准备|谈|签|配|批|定|约|租|搬|建|布置)好了|"
        r"(?:装|弄|修|考|读|看|学|填|交|签|拍|剪|搬)完了",
    ),
)
_STATE_PATTERNS = [
    (state, re.compile(rf"\b(?:{words})\b", re.I)) for state, words in _STATES_EN
] + [(state, re.compile(words)) for state, words in _STATES_ZH]

# Deictic time: told relative to when it was said, so the statement is about one moment.
_MOMENT = re.compile(
    r"\b(?:yesterday|today|tonight|this (?:morning|afternoon|evening|weekend)|last (?:night|"
    r"week|weekend|month|year|time|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"\d+ (?:days?|weeks?|months?|years?) ago|earlier today|the other day)\b"
    r"|昨天|今天|前天|昨晚|今晚|今早|今天早上|刚才|上周|这周|本周|上个月|这个月|上周末|这周末|那天",
    re.I,
)
# A weekday with a past verb: "watched it on Tuesday", 周一见了客户 (not 周会是周一上午十点, nor a
# habit: "I volunteer at the shelter on Sunday mornings", "I reorder it on Monday").
_ON_WEEKDAY = re.compile(
    r"\bon (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I
)
# An English past-tense verb: a regular "-ed" form (not "-eed": need, proceed) or an irregular
# past of the common verbs (a closed class; those spelled as their present, "read", "put", are
# left out: they do not tell a past).
_PAST_VERB = re.compile(
    r"\b(?:[a-z]{2,}(?<!e)ed|had|did|was|were|went|came|got|made|took|gave|saw|met|ate|drank"
    r"|ran|drove|rode|flew|left|told|said|found|felt|kept|slept|paid|sent|spent|bought|brought"
    r"|caught|taught|thought|fought|sold|held|lost|won|wore|wrote|broke|chose|spoke|stole|sat"
    r"|stood|heard|began|swam|sang|rang|fell|built|bent|lent|meant|knew|grew|threw|blew|drew"
    r"|forgot|froze|hid|bit|shook|woke|dealt)\b",
    re.I,
)
# A verb's 了 followed by an amount: something that happened (聊了一个小时, 晚点了两个小时).
_ZH_DONE_AMOUNT = re.compile(r"[\u4e00-\u9fff]了[\d一二两三四五六七八九十几半]")
# A verb's 了 inside a clause: something that happened (出席了在武汉召开的年会, 吃了顿饭), not a
# state reached at the clause's end (换成小米了) nor a condition (卡了就重启: whenever it hangs).
_ZH_PERFECTIVE = re.compile(
    r"(?<!为)(?<!除)(?<!算)[\u4e00-\u9fff]了(?![解吧啊呀呢吗就])[\u4e00-\u9fff]"
)
_ZH_WEEKDAY_DONE = re.compile(r"(?:周|星期|礼拜)[一二三四五六日天].{0,8}?[\u4e00-\u9fff]了")
_QUESTION = re.compile(r"[?？]|吗[。！]?\s*$")
_ADDITIVE = re.compile(
    r"\b(?:also|as well|another|additionally|besides|in addition)\b|\btoo\b(?=\s*(?:[-–—.!?,]|$))|"
    r"也|另外|此外|还有|同时|(?:^|[，,。；;])\s*(?:再|然后)",
    re.I,
)

# Aspect and modality: closed classes of function words, not topics. A statement that keeps its
# value ("still", 还在, 没搬) gives no new one; one that only weighs a change ("might", "wondering
# if I should", 考虑, 要不要) has not made it. Measured on the update-pair corpus's tune part
# (training/slots/corpus/, docs/UPDATES.md): 48 of the 52 newer statements with a keeping word
# and 71 of the 73 with a weighing word are labelled "both stay true". (还是用…吧 is "better use
# …", a switch suggested, so only 还是那/在/住/每 keep.)
_KEEPS = re.compile(
    r"\b(?:still|as (?:usual|always|before|ever))\b|还在|还是(?:那|在|住|每)|"
    r"没(?:搬|换|变|动)|照旧|照样|老样子|依然|仍然",
    re.I,
)
_WEIGHS = re.compile(
    r"\b(?:might|maybe|perhaps|considering|wondering|undecided|not sure)\b|"
    r"\bshould (?:i|we)\b|nothing(?:'s| has)? (?:been )?decided|"
    r"可能|考虑|要不要|该不该|不知道|犹豫|纠结",
    re.I,
)

# Cessation: what was so has stopped ("gave up on keto", "cancelled Spotify", 咖啡戒了, 交行那张卡
# 注销了). On the corpus's tune part, 45 of the 48 newer statements saying one (not negated)
# are labelled updates (the rule also needs the nearest memory and common ground). 停了 is left
# out: 钢琴课今天停了 is a lesson off once, not the lessons ended.
_ENDS = re.compile(
    r"\b(?:gave up|give up|giving up|quit|quitting|cancell?ed|stopped(?! by)|no more|no longer|"
    r"(?:not|n't) [\w ]{0,20}any ?more|got rid of|called it off|"
    r"handed (?:[\w']+ ){0,3}(?:back|over|in|on)|sold (?:the|my|it|our)|retired|ditched|"
    r"dropped out|moved out|ended(?! up)|finished with|tapered off|came off)\b|"
    r"放弃|戒了|退了|注销|解散|取消|断掉|断了|卖了|删了|不再|没再|分手|停掉|结束了|辞职|"
    r"不[考买学去用做喝吃玩干练弹打上看追]了",
    re.I,
)

# Correction: the user says what they told before was wrong ("my bad, it's in Bradford", "I gave
# you the wrong postcode", 之前说错了, 看错短信了). Words as common in chat as "sorry" and
# "actually" are left out ("sorry to hear that", "let me know how it turns out" correct nothing
# on LoCoMo). On the corpus's tune part, all 41 newer statements with one of these are labelled
# updates.
_CORRECTS = re.compile(
    r"\b(?:my bad|misread|misremembered|correction|i meant|mixed up|put me right)\b|"
    r"\b(?:was|got it|had (?:that|it)|told you|gave you the) wrong\b|\bthe wrong\b|"
    r"\bwrong about\b|\bignore what i said\b|\bmix(?:ing|ed)? (?:it|them|that) up\b|"
    r"说错|记错|记混|记岔|看错|搞错|弄错|更正|纠正|之前说|上次说|刚才说|"
    r"(?:^|[，,。！!\s])[啊哦噢]?不对[，,！!]",
    re.I,
)

# "won't quit", "never give up", "don't ever stop", 不会放弃, 别放弃: negated, an end is a resolve.
_NEGATED_BEFORE = re.compile(
    r"(?:\b(?:not|never|no|won't|wont|don't|dont|didn't|can't|cannot|isn't)\b(?:\s+\w+){0,2}\s*"
    r"|[不别没未绝](?:会|要|能|想|肯)?)$",
    re.I,
)


def _says_it_ended(text: str) -> bool:
    """A cessation (``_ENDS``) that is not negated just before it."""
    return any(
        not _NEGATED_BEFORE.search(text[max(0, match.start() - 24) : match.start()])
        for match in _ENDS.finditer(text)
    )


# An amount said to have moved, right before the new amount: "dropped to 28 hrs/wk", "fees went
# up to £9,535", "pushed ballet back to 6:45", 涨到一万五了, 只剩15个学分了. Bare "now", 现在 and
# 已经 are left out: before a number they tell the time (现在下午3点了) or an age (已经9岁了).
_MOVED_TO = re.compile(
    r"\b(?:(?:went|gone|go|goes|going|is|are|was|'s|been|moved|bumped|upped|raised|cut|dropped|"
    r"fell|rose|climbed|jumped|increased|decreased|reduced|pushed(?: back)?|brought "
    r"(?:forward|down)|put|changed|come|came) (?:\w+ ){0,3}?(?:up |down |back )?to|up to|down to|"
    r"now at|more like|increased to|reduced to)\b|"
    r"涨到|降到|减到|增加到|提到|调到|升到|跌到|长到|瘦到|胖到|改成|改到|变成|只剩|还剩|剩下",
    re.I,
)
# How far after the marker the new amount may start (a word or two: "up to a 12", 涨到了一万五).
_MOVED_TO_REACH = 6


@dataclass(frozen=True)
class Span:
    kind: str  # number, identifier, quoted, name, state
    start: int
    end: int
    value: str  # canonical value, compared across statements


def chinese_number(text: str) -> int | None:
    """一百五 → 150, 四千五 → 4500, 一万二千 → 12000, 十一 → 11, 两 → 2 (None if not one)."""
    text = text.lstrip("第")
    if not text or any(ch not in _CN_DIGITS and ch not in _CN_UNITS for ch in text):
        return None
    total, section, digit, last_unit = 0, 0, None, 0
    zero_after_unit = False  # 一百零五, 三万零五: the digit after 零 counts in ones
    for ch in text:
        if ch in _CN_DIGITS:
            digit = _CN_DIGITS[ch]
            zero_after_unit = zero_after_unit or ch in "零〇"
            continue
        zero_after_unit = False
        unit = _CN_UNITS[ch]
        if unit >= 10_000:
            section = (section + (digit or 0)) * unit
            total, section, digit, last_unit = total + section, 0, None, unit
        else:
            section += (1 if digit is None else digit) * unit
            digit, last_unit = None, unit
    if digit is not None:
        # 一百五 / 四千五 / 两万五: a trailing digit counts in the next lower unit.
        lower = last_unit // 10 if last_unit >= 100 and not zero_after_unit else 1
        section += digit * lower
    return total + section


def _number_value(raw: str) -> str:
    cleaned = raw.lstrip("第$£€¥").replace(",", "")
    cn = chinese_number(cleaned)
    if cn is not None:
        return str(cn)
    multiplier = 1
    if cleaned[-1:] in "kK":
        cleaned, multiplier = cleaned[:-1], 1000
    elif cleaned[-1:] in "mM":
        cleaned, multiplier = cleaned[:-1], 1_000_000
    if ":" in cleaned:
        return cleaned
    try:
        number = float(cleaned) * multiplier
    except ValueError:
        return cleaned.casefold()
    return f"{number:g}"


def _clock_value(hour_text: str, minute_text: str | None) -> str | None:
    if hour_text == "一" and minute_text is None:
        return None  # 一点 alone is "a little" far more often than one o'clock
    hour = int(hour_text) if hour_text.isdigit() else chinese_number(hour_text)
    if minute_text is None:
        minute: int | None = 0
    elif minute_text == "半":
        minute = 30
    else:
        minute = int(minute_text) if minute_text.isdigit() else chinese_number(minute_text)
    if hour is None or minute is None or hour > 24 or minute > 59:
        return None
    return f"{hour}:{minute:02d}"


_TITLE_BEFORE = re.compile(r"(?<![A-Za-z])(?:Dr|Mr|Mrs|Ms|Mx|Prof|St|Sr|Jr)\.$")


def value_spans(text: str) -> list[Span]:
    """The spans of ``text`` that hold values, left to right, never overlapping."""
    found: list[Span] = []

    def add(kind: str, start: int, end: int, value: str) -> None:
        if end > start and all(end <= s.start or start >= s.end for s in found):
            found.append(Span(kind, start, end, f"{kind}:{value}"))

    for match in _ORDINAL.finditer(text):
        add("ordinal", match.start(), match.end(), match.group(1))
    for match in _MEASURE.finditer(text):
        amount, unit = match.group(1), match.group(2).casefold()
        if unit in {"am", "pm"}:
            hour = int(float(amount)) % 12 + (12 if unit == "pm" else 0)
            add("number", match.start(), match.end(), f"{hour}:00")
        else:
            multiplier = {"k": 1000}.get(unit, 1)
            add("number", match.start(), match.end(), f"{float(amount) * multiplier:g}")
    for match in _IDENTIFIER.finditer(text):
        add("identifier", match.start(), match.end(), match.group(0).casefold())
    for match in _WEEKDAY_ZH.finditer(text):
        add("date", match.start(), match.end(), f"weekday {_WEEKDAYS.find(match.group(1)) % 7}")
    for match in _QUOTED.finditer(text):
        add("quoted", match.start(), match.end(), match.group(1).strip().casefold())
    for match in _TECH_PATTERN.finditer(text):
        add("name", match.start(1), match.end(1), match.group(1).casefold())
    for match in _CN_CLOCK.finditer(text):
        clock = _clock_value(match.group(1), match.group(2))
        if clock is not None:
            add("number", match.start(), match.end(), clock)
    for match in _CN_FRACTION.finditer(text):
        value = _fraction_value(match.group(2), match.group(1))
        if value is not None:
            add("number", match.start(), match.end(), value)
    for match in _CN_HALF.finditer(text):
        add("number", match.start(), match.end(), f"{float(_number_value(match.group(1))) + 0.5:g}")
    for match in _FRACTION.finditer(text):
        top, bottom = int(match.group(1)), int(match.group(2))
        if 0 < top < bottom:
            add("number", match.start(), match.end(), f"{top / bottom:g}")
    for match in _DOZEN.finditer(text):
        add("number", match.start(), match.end(), "12")
    for match in _NUMBER.finditer(text):
        if match.group(0) != "一":  # 一个月, 一辆车: "a month", "a car"
            add("number", match.start(), match.end(), _number_value(match.group(0)))
    for match in _NUMBER_WORD.finditer(text):
        if match.group("word"):
            amount = _NUMBER_WORDS[match.group("word").casefold()]
        else:
            unit = match.group("unit").casefold()
            amount = _NUMBER_WORDS[match.group("tens").casefold()] + _ONES.index(unit)
        add("number", match.start(), match.end(), str(amount))
    hypothetical = [m.span() for m in _HYPOTHETICAL.finditer(text)]
    for state, pattern in _STATE_PATTERNS:
        for match in pattern.finditer(text):
            if not any(start <= match.start() < end for start, end in hypothetical):
                add("state", match.start(), match.end(), state)
    for match in _RELATIVE_TIME.finditer(text):
        add("time", match.start(), match.end(), match.group(0).casefold())
    for match in _CAPITALISED.finditer(text):
        start, words = match.start(), match.group(0).split(" ")
        before = text[:start].rstrip()
        # A sentence's first word is capitalised anyway, and "The", "Our" lead many names.
        # (After a label's colon a word is its value: "Team chat: Slack.")
        sentence_start = not before or before[-1] in '.!?。！？;\n"“'
        if sentence_start and _TITLE_BEFORE.search(before):
            sentence_start = False  # "Dr. Alvarez", "Mrs. Chen": a title's full stop ends nothing
        if _TITLE_BEFORE.search(text[: match.start() + len(words[0]) + 1]):
            start += len(words[0]) + 2  # "Dr." names no one: the name after it is the value
            words = words[1:]
        if not words:
            continue
        if words[0] in _STOP_CAPITALS or (sentence_start and len(words) == 1):
            start += len(words[0]) + 1
            words = words[1:]
        if words and " ".join(words) not in _STOP_CAPITALS:
            name = " ".join(words).casefold()
            # "on Saturdays": a weekday said of every week is still a day, not a name
            day = name[:-1] if name[:-1] in _CALENDAR_WORDS else name
            add("date" if day in _CALENDAR_WORDS else "name", start, match.end(), day)
    if _CJK_RUN.search(text):
        for match in _ZH_TITLED_NAME.finditer(text):
            add("name", match.start(), match.end(), match.group(0))
        for match in _ASCII_WORD_IN_CJK.finditer(text):
            if match.group(0)[0].isupper():
                add("name", match.start(), match.end(), match.group(0).casefold())
        for run in _CJK_RUN.finditer(text):
            offset = run.start()
            for word, flag in jieba.posseg.cut(run.group(0)):
                if flag in _ZH_NAME_TAGS and len(word) >= 2:
                    add("name", offset, offset + len(word), word)
                offset += len(word)
    return sorted(found, key=lambda s: s.start)


def masked(text: str, spans: list[Span]) -> str:
    """The statement with its value spans replaced by one mask character each."""
    parts, cursor = [], 0
    for span in spans:
        parts.append(text[cursor : span.start])
        parts.append(MASK)
        cursor = span.end
    parts.append(text[cursor:])
    return "".join(parts)


_LEADING_PRONOUN = re.compile(r"^\W*(?:(?:i|my|our|we|i'm|we're)\b\W*|我们的|我们|我的|我)", re.I)


def _in_subject_position(text: str, span: Span) -> bool:
    """A name or identifier at the very start names what the statement is about (工单OPS-3307：…,
    "UPS 1Z… is the tripod", 李娜负责招聘), so a different one there is another thing, not a new
    value. States and numbers at the start are still values ("Drafting …", "9 engineers")."""
    if span.kind not in {"name", "identifier"}:
        return False
    lead = _LEADING_PRONOUN.match(text)
    before = text[lead.end() if lead else 0 : span.start]
    if _CJK_RUN.search(text) and not re.search(r"[A-Za-z]{2,}\s", before):
        # 工单OPS-3307 (a noun before it), not 我在杭州工作 (a preposition or verb before it).
        return len(before.strip()) <= 2 and not _ZH_VERB_BEFORE.search(before)
    # "UPS 1Z… is", "Ticket OPS-3307:" (a label before it), not "We use MySQL" (a verb before it).
    words = before.split()
    labelled = not words or (len(words) == 1 and lead is None and words[0][:1].isupper())
    return labelled and span.end < len(text.rstrip(" .!?。！？"))


_ZH_VERB_BEFORE = re.compile(r"[在用是去到住从为叫有给跟和对把]")


# A switch names the value it leaves in a from-phrase: "moved from MySQL to PostgreSQL",
# "switched from Vim to VS Code", 从MySQL换成PostgreSQL, 由钉钉改用飞书. Only named things count:
# "from 9 to 5" is a range, not a switch.
_FROM_TO = re.compile(r"\bfrom\s+(.{1,60}?)\s+(?:to|onto|over to)\b", re.I)
_ZH_FROM_TO = re.compile(
    r"[从由](.{1,20}?)(?:换成|换到|换为|改成|改为|改用|转到|转成|迁到|迁移到|切到|切换到|升级到)"
)
_SWITCHABLE_KINDS = frozenset({"name", "identifier", "quoted"})


def departed_values(text: str, spans: list[Span]) -> list[str]:
    """The named values inside a switch's from-phrase."""
    regions = [m.span(1) for pattern in (_FROM_TO, _ZH_FROM_TO) for m in pattern.finditer(text)]
    return list(
        dict.fromkeys(
            s.value
            for s in spans
            if s.kind in _SWITCHABLE_KINDS
            and any(start <= s.start and s.end <= end for start, end in regions)
        )
    )


def _amount_moved(text: str, spans: list[Span]) -> bool:
    """A number comes right after a word that says an amount moved (``_MOVED_TO``)."""
    starts = [span.start for span in spans if span.kind == "number"]
    return any(
        0 <= start - match.end() <= _MOVED_TO_REACH
        for match in _MOVED_TO.finditer(text)
        for start in starts
    )


def slot_of(text: str) -> Slot:
    """The statement's slot signal (compared by the statement's own vector, ``slot_vector``)."""
    spans = value_spans(text)
    frame = masked(text, spans)
    return Slot(
        frame=frame,
        departed=departed_values(text, spans),
        subjects=list(dict.fromkeys(s.value for s in spans if _in_subject_position(text, s))),
        terms=list(dict.fromkeys(t for t in tokenize(frame) if t != MASK)),
        values=list(dict.fromkeys(s.value for s in spans)),
        moment=bool(
            _MOMENT.search(text)
            or (_ON_WEEKDAY.search(text) and _PAST_VERB.search(text))
            or _ZH_WEEKDAY_DONE.search(text)
            or _ZH_DONE_AMOUNT.search(text)
            or _ZH_PERFECTIVE.search(text)
        ),
        additive=bool(_ADDITIVE.search(text)),
        question=bool(_QUESTION.search(text)),
        keeps=bool(_KEEPS.search(text)),
        weighs=bool(_WEIGHS.search(text)),
        ends=_says_it_ended(text),
        corrects=bool(_CORRECTS.search(text)),
        amount_moved=_amount_moved(text, spans),
    )


# -- the decision ------------------------------------------------------------------------------

STATEFUL_KINDS: frozenset[Kind] = frozenset({"preference", "decision", "task_state", "fact"})


def is_stateful(kind: Kind, region: Region, signal: Slot) -> bool:
    """Whether a statement describes a state that a later statement can move on."""
    if kind not in STATEFUL_KINDS:
        return False
    has_task_state = any(v in {"state:planned", "state:in_progress"} for v in signal.values)
    if has_task_state or kind in {"preference", "decision", "task_state"}:
        return True
    return region == "semantic" and not signal.moment


@dataclass(frozen=True)
class SlotSide:
    """One statement as the rule sees it: who said it, what kind it is, and its slot signal."""

    speaker: str
    kind: Kind
    region: Region
    signal: Slot
    frame_vector: Vector


@dataclass(frozen=True)
class SlotUpdate:
    """Why the newer statement supersedes the older one (kept in the history entry)."""

    frame_cosine: float
    term_overlap: float
    old_values: tuple[str, ...]
    new_values: tuple[str, ...]

    def describe(self) -> str:
        return (
            f"slot: frame cosine {self.frame_cosine:.3f}, terms {self.term_overlap:.2f}; "
            f"{', '.join(self.old_values)} -> {', '.join(self.new_values)}"
        )


NEVER_UPDATES: frozenset[Kind] = frozenset({"procedure", "emotion", "chit_chat"})


def term_overlap(first: list[str], second: list[str]) -> float:
    """Shared content words over the shorter frame's (1.0 when one frame's words are all shared)."""
    a, b = set(first), set(second)
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


# Light verbs and measure words that say how a value is held or changed, not which slot it is.
_LIGHT_WORDS = frozenset(
    [
        *"去来做用到个在把给换改加涨扩推定降变找有都还就才再又只",
        *("已经", "现在", "目前", "平时", "基本", "一般", "一直", "以后", "今后"),
        *("所有", "全部", "总是", "经常", "通常", "最近", "之前", "以前"),
        *("终于", "总算", "刚刚", "马上", "快要", "已"),
        # "still", "as before": they keep a value, they give none (平板还是那台)
        *("还是", "仍然", "依然", "照旧", "照样"),
    ]
)
# A demonstrative with its measure word (那台, 这个, 那家) points back at a value already said.
_ZH_DEMONSTRATIVE = re.compile(r"^[这那][\u4e00-\u9fff]?$")


def _content_terms(terms: list[str]) -> list[str]:
    return [t for t in terms if t not in _LIGHT_WORDS and not _ZH_DEMONSTRATIVE.match(t)]


def shared_words(first: list[str], second: list[str]) -> set[str]:
    """The content words two statements have in common, a word inside a longer shared one not
    counted again (:func:`distinct_words`)."""
    return distinct_words(set(_content_terms(first)) & set(_content_terms(second)))


def distinct_words(words: set[str]) -> set[str]:
    """``words`` without those inside a longer one of them (jieba's search mode gives 每周五 as
    每周, 周五 and 每周五: one word)."""
    return {w for w in words if not any(w != other and w in other for other in words)}


def content_word_count(signal: Slot) -> int:
    """How many content words a statement has, for the rules that need it brief. Chinese is
    segmented for search, into words and the words inside them (少年宫: 少年, 少年宫), so a word
    inside a longer one of the same statement is not counted again."""
    words = _content_terms(signal.terms)
    chinese = [w for w in words if cjk_ratio(w) > 0]
    return sum(
        not (w in chinese and any(w != other and w in other for other in chinese)) for w in words
    )


# The verb that joins what a statement is about to what it says of it ("… is …", "…是…").
_COPULA = re.compile(r"\b(?:is|are|was|were|am)\b|是|为", re.I)


def _predicate_terms(frame: str) -> set[str]:
    """Content words only after the statement's first copula: what it says, not what about."""
    match = _COPULA.search(frame)
    if match is None:
        return set()
    return set(tokenize(frame[match.end() :])) - set(tokenize(frame[: match.start()]))


def _swapped_modifier(first: list[str], second: list[str]) -> bool:
    """One word swapped for another just before the shared one: kitchen renovation / bathroom
    renovation, 厨房装修 / 卫生间装修 name two things (a modifier comes before its head)."""
    a, b = _content_terms(first), _content_terms(second)
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            return False
        if tag == "replace" and i2 - i1 == 1 and j2 - j1 == 1 and not _one_word(a[i1], b[j1]):
            return i2 < len(a) and j2 < len(b)  # something shared follows the swap
    return False


def _swapped_attribute(
    first: list[str], second: list[str], frames: tuple[str, str] = ("", "")
) -> bool:
    """One frame word stands where the other frame has one or two others: two attributes.

    "frontend … written in" / "backend … written in", 生产数据库密码 / 生产数据库地址、端口: the
    frames align on their shared words and differ in a word at one place, which names what the
    statement is about. Two forms of one word (apply / application) are not a swap, and neither is
    a word after the copula on both sides (宽带是电信的 / 宽带是联通的): that is a value no span
    caught, not the attribute.

    The swapped word names the attribute when it modifies a word both share (frontend /
    backend *written*, 护照到期 / 驾照 *年*), or when it is the only difference (a minimal pair:
    密码 / 地址、端口).
    Where the frames differ in other places too, the sentence was worded anew and one swapped
    word is a verb or a phrase reworded ("We pay … a month for broadband" / "Broadband costs us …
    a month after the price rise"), not a second attribute.
    """
    if not set(first) & set(second):
        return False
    a, b = _content_terms(first), _content_terms(second)
    said_first, said_second = (_predicate_terms(frame) for frame in frames)
    opcodes = SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    differences = sum(tag != "equal" for tag, *_ in opcodes)
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag != "replace" or min(i2 - i1, j2 - j1) != 1 or max(i2 - i1, j2 - j1) > 2:
            continue
        if set(a[i1:i2]) <= said_first and set(b[j1:j2]) <= said_second:
            continue  # after the copula on both sides: a value in plain words (是电信的 / 是联通的)
        if any(_one_word(x, y) for x in a[i1:i2] for y in b[j1:j2]):
            continue
        # Before a shared word, unless a swapped word stands elsewhere on the other side (the
        # sentence reordered: "We pay … for broadband" / "Broadband costs us …").
        modifies_shared = (
            index + 1 < len(opcodes)
            and opcodes[index + 1][0] == "equal"
            and not set(a[i1:i2]) & set(b)
            and not set(b[j1:j2]) & set(a)
        )
        if modifies_shared or differences == 1:
            return True
    return False


def _one_word(first: str, second: str) -> bool:
    """Two forms of one word (apply / application) or a word and its abbreviation (db / database,
    pw / password, cfg / config: the short one's letters in order, from the same first letter)."""
    if first[:4] == second[:4] and len(first) >= 4:
        return True
    short, long = sorted((first, second), key=len)
    if not short.isascii() or not short.isalpha() or not 2 <= len(short) <= 4:
        return False
    if len(long) < len(short) + 2 or short[0] != long[0]:
        return False
    rest = iter(long[1:])
    return all(letter in rest for letter in short[1:])


# What a value is: a time, an amount, a state or a thing. A new value replaces one of its class.
_VALUE_CLASSES = {
    "date": "when",
    "ordinal": "when",
    "time": "when",
    "number": "amount",
    "state": "state",
}
# Values that come along with a change rather than name what changed.
_CONTEXT_KINDS = frozenset({"state", "time"})


def _classes_differ(old: tuple[str, ...], new: tuple[str, ...]) -> bool:
    """ "Due on the 1st" / "is 1,450", "预算是80万" / "要在月底前上线": two attributes."""
    old_classes = {_VALUE_CLASSES.get(_kind(v), "thing") for v in old}
    new_classes = {_VALUE_CLASSES.get(_kind(v), "thing") for v in new}
    return not old_classes & new_classes


def _kind(value: str) -> str:
    return value.split(":", 1)[0]


def _kinds_of(values: tuple[str, ...]) -> set[str]:
    return {_kind(value) for value in values}


def changed_values(older: Slot, newer: Slot) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The values only the older statement has, and those only the newer one has."""
    # Relative times ("next week", 今年) frame a statement; they are not the value that changed.
    old_values = tuple(
        v
        for v in older.values
        if (v not in newer.values or v in newer.departed) and _kind(v) != "time"
    )
    new_values = tuple(v for v in newer.values if v not in older.values and _kind(v) != "time")
    return old_values, new_values


def about_two_things(older: Slot, newer: Slot) -> bool:
    """Each statement opens with the name or identifier it is about (``Slot.subjects``) and they
    share none: 工单OPS-3307 / 工单OPS-3370, 李娜负责招聘 / 李妍负责新员工培训 are two things,
    however alike the rest of the wording, and one neither restates nor replaces the other. (One
    side without a subject says nothing: 宽带师傅说路由器卡了… names who said it.)"""
    if not older.subjects or not newer.subjects:
        return False
    return not set(older.subjects) & set(newer.subjects)


def adds_a_value(older: Slot, newer: Slot) -> bool:
    """The newer statement names a value the older one lacks (a number, an identifier, a name;
    relative times frame a statement and do not count): it says something the older does not,
    so it is no restatement of it (驾照：2030年 after 护照到期：2028年6月)."""
    return bool(changed_values(older, newer)[1])


def swaps_a_word(older: Slot, newer: Slot, policy: MemoryPolicy) -> bool:
    """In a language the encoder does not read, each statement has a content word the other
    lacks (function characters aside): a word was put in another's place, so the two give two
    values however alike the rest is (我儿子在学围棋 / 我儿子在学国际象棋, both on Sundays at the
    same place). A restatement only adds or drops words (周末一般去爬山 / 周末我一般都去爬山的).
    Where the encoder reads the language its cosine tells a restatement in other words ("The
    office is in the city center" / "Our office is located in the centre of the city")."""
    if encoder_reads_both(older, newer, policy):
        return False
    first, second = (set(_content_terms(side.terms)) for side in (older, newer))
    return bool(topical(first - second)) and bool(topical(second - first))


def names_two_slots(
    older: Slot,
    newer: Slot,
    old_values: tuple[str, ...],
    new_values: tuple[str, ...],
    subject_known: bool = False,
) -> bool:
    """Signs that two statements are about two subjects or attributes, whatever else matches.

    ``subject_known``: an extracted triplet already names the subject ("my home address is …"),
    so several values changing at once (12 Elm Street → 5 Oak Road) is one new value.
    """
    subjects = {*older.subjects, *newer.subjects}
    if any(v in subjects for v in (*old_values, *new_values)):
        return True  # the changed value is what each statement is about: two things
    if set(newer.departed) & set(older.values):
        return False  # "from <the older value> to …": the newer one says it is the same slot
    if old_values and new_values:
        if (
            not subject_known
            and len(_kinds_of(old_values) - _CONTEXT_KINDS) > 1
            and len(_kinds_of(new_values) - _CONTEXT_KINDS) > 1
        ):
            return True  # two things changed at once: two subjects ("Anna is 34", "Ben is 36")
        if _classes_differ(old_values, new_values):
            return True  # a date and an amount, an amount and a state: two attributes
    # "frontend … written in" / "backend … written in": a minimal pair names two attributes.
    return _swapped_attribute(older.terms, newer.terms, (older.frame, newer.frame))


def slot_update(older: SlotSide, newer: SlotSide, policy: MemoryPolicy) -> SlotUpdate | None:
    """The newer statement gives the older one's slot a new value (None: it does not)."""
    if older.speaker != newer.speaker:
        return None
    if newer.kind in NEVER_UPDATES or not is_stateful(older.kind, older.region, older.signal):
        return None
    if newer.signal.additive or older.signal.question or newer.signal.question:
        return None  # an addition, or a question: neither states a new value
    whom = (about_whom(older.signal), about_whom(newer.signal))
    if None not in whom and whom[0] != whom[1]:
        return None  # "My brother lives in Leeds" / "I live in Camden": two people
    old_values, new_values = changed_values(older.signal, newer.signal)
    cosine = float(older.frame_vector @ newer.frame_vector)
    overlap = term_overlap(older.signal.terms, newer.signal.terms)
    # The default encoder reads English only: for other languages its cosine alone is no proof.
    trusted = encoder_reads_both(older.signal, newer.signal, policy)
    shares_words = overlap >= policy.slot_term_overlap
    if bool(old_values) != bool(new_values) and cosine >= policy.slot_cosine and shares_words:
        # One side's value is a plain word no span caught (字节 → 腾讯): its own words stand in.
        if not old_values:
            old_values = _own_words(older.signal, newer.signal)
        else:
            new_values = _own_words(newer.signal, older.signal)
    if not old_values or not new_values:
        return None  # nothing replaced: a restatement or an elaboration
    # "from <the older value> to …" says which slot it is about: the frame need only be near.
    leaves_older_value = bool(set(newer.signal.departed) & set(older.signal.values))
    if names_two_slots(older.signal, newer.signal, old_values, new_values):
        return None
    if not trusted:
        # Where the cosine proves nothing, one word in common is a topic, not a slot (我每天喝两杯
        # 美式 / 我每天六点下班, 我爸今年60还在上班 / 我是坐地铁10号线上班的): two at least.
        shares_words = (
            shares_words and len(shared_words(older.signal.terms, newer.signal.terms)) >= 2
        )
    same_slot = (trusted and cosine >= policy.slot_cosine) or (
        cosine >= policy.slot_cosine_floor and (shares_words or leaves_older_value)
    )
    if not same_slot:
        return None
    return SlotUpdate(round(cosine, 4), round(overlap, 4), old_values, new_values)


def _own_words(side: Slot, other: Slot) -> tuple[str, ...]:
    return tuple(f"word:{t}" for t in sorted(set(_content_terms(side.terms)) - set(other.terms)))


# -- one rule for both paths ---------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """A memory (or the turn about to become one) as the update rule sees it."""

    speaker: str
    kind: Kind
    region: Region
    triplet: Triplet | None
    slot: Slot | None
    frame_vector: Vector | None
    vector: Vector | None = None  # the whole statement's (task states compare these)
    session: str | None = None  # the conversation it was said in (None: unknown)


def _said_by_one(older: Statement, newer: Statement) -> tuple[Vector, Vector] | None:
    """The two whole-statement vectors when one speaker said both and both have one."""
    if older.speaker != newer.speaker or older.vector is None or newer.vector is None:
        return None
    return older.vector, newer.vector


def _stateful_pair(older: Statement, newer: Statement) -> tuple[Vector, Vector] | None:
    """The two whole-statement vectors when the newer statement may update the older one at all:
    one speaker said both (``_said_by_one``), the newer is of a kind that updates and the older
    states something that can change. The common gate of the whole-statement rules below."""
    assert older.slot is not None
    vectors = _said_by_one(older, newer)
    if vectors is None or newer.kind in NEVER_UPDATES:
        return None
    return vectors if is_stateful(older.kind, older.region, older.slot) else None


def _triplets_conflict(first: Triplet | None, second: Triplet | None) -> bool:
    return (
        first is not None
        and second is not None
        and first.subject == second.subject
        and first.attribute == second.attribute
        and normalise(first.value) != normalise(second.value)
    )


def update_reason(
    older: Statement, newer: Statement, policy: MemoryPolicy, nearest: bool = False
) -> str | None:
    """Why ``newer`` supersedes ``older`` (kept in the history entry), or None when it does not.

    The extracted triplets say it exactly when both have one (same subject and attribute,
    another value) — unless the slot signals show two subjects or attributes
    (``names_two_slots``). Otherwise the slot rule decides. (Additive words do not stop a
    triplet: "我自己的side project也都用React写了" is a switch told with 也.)

    ``nearest``: ``older`` is the current memory closest to ``newer`` as a whole, which a value
    told in plain words needs (``value_in_words``).
    """
    if _triplets_conflict(older.triplet, newer.triplet):
        assert older.triplet is not None and newer.triplet is not None
        if (
            older.slot is not None
            and newer.slot is not None
            and names_two_slots(
                older.slot, newer.slot, *changed_values(older.slot, newer.slot), True
            )
        ):
            return None
        return f"triplet: {older.triplet.attribute}: {older.triplet.value} -> {newer.triplet.value}"
    if older.slot is None or newer.slot is None or newer.slot.weighs:
        return None  # only weighing a change ("thinking of switching to Monzo") has not made it
    older, newer = named_alike(older, newer)
    assert newer.slot is not None
    # A statement that keeps its value ("still cycling in", 还在中石化) may say a task moved on
    # ("still waiting on the visa") or an amount, never a new value or a new way.
    keeps = newer.slot.keeps
    moved_on = (
        state_moved_on(older, newer, policy)
        or (None if keeps else new_way_to(older, newer, policy))
        or (None if keeps else switched_to(older, newer, policy))
        or quantity_changed(older, newer, policy)
        or (amount_moved_to(older, newer, policy) if nearest else None)
        or (amount_nearby(older, newer, policy) if nearest and not keeps else None)
        or (changed_over(older, newer, policy) if nearest and not keeps else None)
        or (value_left(older, newer, policy) if nearest else None)
        or (None if keeps else value_after_join(older, newer, policy))
        or (came_to_an_end(older, newer, policy) if nearest and not keeps else None)
        or (corrected(older, newer, policy) if nearest else None)
        or (None if keeps else same_attribute(older, newer, policy))
        or (value_in_words(older, newer, policy) if nearest and not keeps else None)
        or (holds_now(older, newer, policy) if nearest and not keeps else None)
    )
    if moved_on is not None:
        return moved_on
    if keeps or older.frame_vector is None or newer.frame_vector is None:
        return None
    assert older.slot is not None and newer.slot is not None
    update = slot_update(
        SlotSide(older.speaker, older.kind, older.region, older.slot, older.frame_vector),
        SlotSide(newer.speaker, newer.kind, newer.region, newer.slot, newer.frame_vector),
        policy,
    )
    return None if update is None else update.describe()


# -- something that stopped ---------------------------------------------------------------------


def came_to_an_end(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """The newer statement says that what the older one told has stopped: "I'm doing keto" →
    "keto lasted about 5 weeks, I'm back on bread"; "I pay for Spotify Premium" → "cancelled
    spotify"; 我每天都用咖啡机做一杯拿铁 → 咖啡戒了，咖啡机送人了.

    A stateful older statement (no past event: an event that happened does not stop), the
    current memory nearest the newer one (checked by the caller), and a word in common — or,
    where the encoder does not read the language, a character pair — so that the end is of
    what the older one told, not of something else the user also does.
    """
    assert older.slot is not None and newer.slot is not None
    first, second = older.slot, newer.slot
    if not second.ends or first.moment or first.question or second.question or second.additive:
        return None
    vectors = _stateful_pair(older, newer)
    if vectors is None:
        return None
    shared = common_ground(first, second, policy)
    if not shared:
        return None
    cosine = float(vectors[0] @ vectors[1])
    return f"ended: {', '.join(sorted(shared))}; statement cosine {cosine:.3f}"


def amount_moved_to(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """The newer statement says the amount moved, to a number the older does not hold: "I'm on
    37.5 hours a week" → "dropped to 28 hrs/wk from January"; 我月薪税前一万二 → 转正后涨到一万五了.

    ``quantity_changed`` needs the same unit on both sides; here the words that say the amount
    moved stand in for it ("resting heart rate is around 78" / "resting HR is 61 this month" has
    none). The older states an amount (a stateful statement with a number), it is the current
    memory nearest the newer one (checked by the caller), and they have common ground.
    """
    assert older.slot is not None and newer.slot is not None
    first, second = older.slot, newer.slot
    if not second.amount_moved or second.weighs or second.additive or second.question:
        return None
    old_numbers = {v for v in first.values if _kind(v) == "number"}
    new_numbers = {v for v in second.values if _kind(v) == "number"} - old_numbers
    if not old_numbers or not new_numbers or _stateful_pair(older, newer) is None:
        return None
    shared = common_ground(first, second, policy)
    if not shared:
        return None
    return (
        f"amount moved: {', '.join(sorted(old_numbers))} -> {', '.join(sorted(new_numbers))}; "
        f"shared {', '.join(sorted(shared))}"
    )


# Who a statement is about besides the speaker: kin, friends, third persons (a closed class).
_PEOPLE = re.compile(
    r"\b(?:mum|mom|mother|dad|father|parents?|brothers?|sisters?|sons?|daughters?|wife|husband"
    r"|partner|boyfriend|girlfriend|kids?|child|children|baby"
    r"|grand(?:ma|pa|mother|father|son|daughter|dad|parents?|kids?|children)"
    r"|nan|nana|gran|granny|aunt|uncle|cousin|niece|nephew|friends?|boss|colleagues?"
    r"|neighbou?rs?|flatmates?|roommates?|housemates?"
    r"|he|she|his|her|him|hers)\b|\b(?-i:[A-Z][a-z]+)['’]s\b"
    r"|爸|妈|爹|娘|父亲|母亲|哥|姐|弟|妹|儿子|女儿|闺女|老婆|老公|媳妇|丈夫|妻子|爷|奶奶|外公"
    r"|外婆|姥|孙|叔|姨|舅|姑|侄|朋友|同事|老板|领导|邻居|室友|孩子|娃|宝宝|(?<!其)他|她",
    re.IGNORECASE,
)


def _people(signal: Slot) -> set[str]:
    """The people a statement names besides the speaker ("my brother", 我妈, "Ella's")."""
    return {match.group(0).casefold() for match in _PEOPLE.finditer(signal.frame)}


# A statement about the speaker opens with "I", "I'm" or 我 + a verb; one about someone else
# opens with who it is, within its first words ("My brother Sam lives in Leeds", "my older
# sister", 我妈…, 我大女儿…).
_OPENS_WITH_SELF = re.compile(r"^\W*(?:i|i'm|i've|i'd|im)\b", re.I)
_OPENS_WITH_MY = re.compile(r"^\W*(?:my|our)\s+((?:[\w'’-]+\s+){0,2}[\w'’-]+)", re.I)
_OPENS_WITH_WO = re.compile(r"^\W*我们?的?([\u4e00-\u9fff]{0,3})")


def about_whom(signal: Slot) -> str | None:
    """Who the statement is about, when its opening says so: "self" ("I live …", "my office
    …"), the person it opens with ("my brother"), or None (it opens with something else)."""
    text = signal.frame
    if _OPENS_WITH_SELF.match(text):
        return "self"
    mine = _OPENS_WITH_MY.match(text)
    if mine is not None:
        for word in mine.group(1).split():
            person = _PEOPLE.match(word)
            if person is not None:
                return person.group(0).casefold()
        return "self"
    ours = _OPENS_WITH_WO.match(text)
    if ours is not None:
        person = _PEOPLE.search(ours.group(1))
        return person.group(0) if person is not None else "self"
    return None


def _brief_pair(
    older: Statement, newer: Statement, policy: MemoryPolicy
) -> tuple[Vector, Vector] | None:
    """The common gate of the rules that read a value told in any words for the nearest memory
    (``amount_nearby``, ``changed_over``, ``holds_now``): the two whole-statement vectors when
    the newer neither weighs nor adds, neither is a question, the pair may update at all
    (``_stateful_pair``), the older is brief (a long chat line holds no such slot) and both name
    the same people ("my brother's a 13", "our drummer moved to Perth": someone else's)."""
    assert older.slot is not None and newer.slot is not None
    first, second = older.slot, newer.slot
    if second.weighs or second.additive or second.question or first.question:
        return None
    if content_word_count(first) > policy.state_max_terms:
        return None
    if _people(first) != _people(second):
        return None
    return _stateful_pair(older, newer)


def _amount(value: str) -> float | None:
    """The size of a number value ("number:1200" → 1200.0; a clock time or a word: None)."""
    if _kind(value) != "number":
        return None
    try:
        return abs(float(value.partition(":")[2]))
    except ValueError:
        return None


def amount_nearby(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """The newer statement gives the older one's amount a nearby new size, in whatever words:
    我爸今年63 → 我爸上周过生日，64了; 儿子身高118 → 给儿子量了下，126了; "I'm 172cm" → "turns
    out I'm 169".

    A changed amount is seldom far from the one it replaces (an age moves by one, a weight by a
    tenth), while the numbers of two attributes seldom sit within a factor of
    ``policy.amount_nearby_ratio``. So: the older is stateful, brief and not an event, said in
    another conversation, the newer is the current memory nearest it (checked by the caller),
    from the same speaker and about the same people; one number went and one came, within that
    factor, no time changed with them, the two are no two attributes (``names_two_slots``), and
    they share common ground besides the unit.
    """
    assert older.slot is not None and newer.slot is not None
    first, second = older.slot, newer.slot
    if older.region == "episodic" or _brief_pair(older, newer, policy) is None:
        return None
    if older.session is None or older.session == newer.session:
        return None  # within one conversation, two such lines list two amounts (two phones)
    old_values, new_values = changed_values(first, second)
    if any(_VALUE_CLASSES.get(_kind(v)) == "when" for v in (*old_values, *new_values)):
        return None
    old_sizes = [size for v in old_values if (size := _amount(v)) is not None]
    new_sizes = [size for v in new_values if (size := _amount(v)) is not None]
    if len(old_sizes) != 1 or len(new_sizes) != 1 or min(old_sizes[0], new_sizes[0]) <= 0:
        return None
    ratio = max(old_sizes[0], new_sizes[0]) / min(old_sizes[0], new_sizes[0])
    if ratio > policy.amount_nearby_ratio:
        return None
    if names_two_slots(first, second, old_values, new_values):
        return None  # "work phone … 0142" / "personal phone … 0199": two attributes
    # What is counted, not how: the unit and a rate's period ("… a month") say nothing of it.
    units = {*_number_units(first).values(), *_number_units(second).values()}
    counted_in = {word for unit in units for word in tokenize(unit)} | units
    shared = common_ground(first, second, policy) - counted_in
    if not shared or (any(unit.startswith("per ") for unit in units) and len(shared) < 2):
        return None  # "We pay 60 a month for broadband" / "… 40 a month for the phone"
    return (
        f"amount nearby: {old_sizes[0]:g} -> {new_sizes[0]:g}; shared {', '.join(sorted(shared))}"
    )


# A verb of change with where it went: "moved everything over to Starling", "switched to
# decaf", "pushed back to May", 改成扫码登录, 换成燕麦, 转到李医生那边. Grammar, not a topic: the
# verb says the value changed, the words after it what it is now.
_CHANGED_TO = re.compile(
    r"\b(?:switch(?:ed)?|swapp?(?:ed)?|chang(?:ed|e)|mov(?:ed|e)|transferr?(?:ed)?|migrat(?:ed|e)"
    r"|shift(?:ed)?|convert(?:ed)?|upgrad(?:ed|e)|downgrad(?:ed|e))"
    r"(?: [\w'’-]+){0,4}? (?:to|onto|into|over to|back to|across to)\b"
    # "pushed back to May", not "pushed me to start" (a spur) nor "the push to finally start"
    r"|\bpush(?:ed)? (?:[\w'’-]+ )?(?:back|forward|out) (?:to|until)\b"
    r"|改成|改到|改为|改用|换成|换到|换用|转到|转去|转成|迁到|挪到|推迟到|延到|延期到|调到|变成",
    re.IGNORECASE,
)


def changed_over(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """The newer statement says that what the older one states changed, and to what: "Our team
    tracks everything in Jira" → "we moved every ticket over to Linear"; 公司VPN每次都要手动输
    验证码登录 → VPN改成扫码登录了.

    ``switched_to`` needs the older statement's words before the verb; here the verb of change
    (``_CHANGED_TO``) is enough when the older is stateful and the current memory nearest the
    newer (checked by the caller), one speaker said both, and they share common ground, which is
    what ties the change to what the older statement said.
    """
    assert older.slot is not None and newer.slot is not None
    first, second = older.slot, newer.slot
    vectors = _brief_pair(older, newer, policy)
    if vectors is None or about_two_things(first, second):
        return None
    match = _CHANGED_TO.search(second.frame)
    if match is None:
        return None
    shared = common_ground(first, second, policy)
    if not shared:
        # Where the encoder reads the language, the two statements close as wholes stand in
        # for shared words ("My everyday account is with Barclays" / "Moved over to Monzo for
        # the day-to-day stuff"): the verb of change says the value changed, the closeness that
        # it is the older statement's.
        cosine = float(vectors[0] @ vectors[1])
        if not (encoder_reads(second, policy) and cosine >= policy.state_cosine_floor):
            return None
        shared = {f"statement cosine {cosine:.3f}"}
    return f"changed over: {match.group(0)}; shared {', '.join(sorted(shared))}"


# Words that set what holds now against what held before: "these days", "now", 现在, 如今,
# 这阵子 (the recall side's current-value words, ``routing._NOW_WORDS``, less those that keep a
# value: "still", 仍然, ``Slot.keeps``). Not "lately": "lately I've been looking into
# counseling" goes on about what the older statement said.
_NOW_CONTRAST = re.compile(
    r"\b(?:now|these days|nowadays|at the moment|at present|currently)\b"
    # (现在 before a time tells the time: 现在下午3点了.)
    r"|现在(?![\d零〇一二两三四五六七八九十几]|[上下]午|早上|晚上|中午)"
    r"|如今|这阵子|这段时间|这些天|目前|最近(?:都|基本|一直|改)",
    re.IGNORECASE,
)


def holds_now(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """The newer statement says what holds now, of what the older one stated: "I keep my savings
    in a Halifax ISA" → "most of my savings sit in Chip these days"; 我挂号都是早上去医院排队 →
    现在都用114挂号.

    A word that sets now against before (``_NOW_CONTRAST``) in a statement that is no event,
    from the same speaker about the same people, for the current memory nearest it (checked by
    the caller), stateful and sharing common ground with it, with something of its own to say
    (a value or a content word the older lacks).
    """
    assert older.slot is not None and newer.slot is not None
    first, second = older.slot, newer.slot
    if second.moment or newer.region == "episodic":
        return None
    if _brief_pair(older, newer, policy) is None or about_two_things(first, second):
        return None
    match = _NOW_CONTRAST.search(second.frame)
    if match is None or _NOW_CONTRAST.search(first.frame) is not None:
        return None  # both say "now": two things that hold now
    if not adds_a_value(first, second) and not _own_words(second, first):
        return None
    old_values, new_values = changed_values(first, second)
    if old_values and new_values and _kinds_of((*old_values, *new_values)) == {"number"}:
        # Only amounts changed: the amount rules judge those ("The team is 9 engineers" /
        # "3 designers now" are two attributes, "has 2 bedrooms" / "costs 1450 now" too).
        return None
    # "Now" is said of many things: the ground shared must be topical (王建国是我的导师 /
    # 王建华是我的高中同学，现在在成都 share only 我的 and 是我).
    shared = topical(common_ground(first, second, policy))
    if not shared:
        return None
    return f"holds now: {match.group(0)}; shared {', '.join(sorted(shared))}"


# A value said to have gone, right after it is named: "Priya left", "Ben's history", "Kev went
# off on leave", 王主任退休了, 王姐调去华东区了. Closed class: verbs of leaving.
_LEFT_AFTER = re.compile(
    r"^(?:['’]s)?\s*(?:has |had |just |finally )?"
    # (not "left early", "left for lunch": a place left, not the role)
    r"(?:left(?! (?:early|late|for|at|home|work|the office))|quit|retired|resigned|went off"
    r"|moved on"
    r"|moved away|stepped down|passed away|is gone|'s gone|’s gone|is history|'s history|’s history"
    r"|got (?:moved|reassigned|transferred)|was (?:moved|reassigned|transferred))\b"
    r"|^(?:已经|也)?(?:退休|调去|调走|调到|走了|离职|辞职|不干了|跳槽|转走|被调|去世|调岗)",
    re.IGNORECASE,
)


def named_values(signal: Slot) -> list[str]:
    """The names, identifiers and titles a statement gives (its switchable values)."""
    return [value for value in signal.values if _kind(value) in _SWITCHABLE_KINDS]


def _masks_filled(signal: Slot) -> tuple[str, list[tuple[str, str]]] | None:
    """The frame's text before its first mask, and each mask's value with the text after it.

    Masks stand in the frame in the order of the spans; when a value repeats, the two cannot be
    told apart (None). Values past the masks are names another statement gave it
    (``named_alike``) and are left out."""
    pieces = signal.frame.split(MASK)
    if len(pieces) - 1 > len(signal.values):
        return None
    return pieces[0], list(zip(signal.values, pieces[1:], strict=False))


def _unmasked(signal: Slot) -> str | None:
    """The statement with its masks filled by the values they stand for (casefolded, as values
    are), or None when the masks are ambiguous (``_masks_filled``)."""
    masked = _masks_filled(signal)
    if masked is None:
        return None
    head, filled = masked
    return (head + "".join(value.partition(":")[2] + after for value, after in filled)).casefold()


def value_left(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """The newer statement names the older one's value and says it has gone: "My manager is
    Priya" → "Priya left in October so I report to Tom"; 我一直在华山医院皮肤科看王主任 →
    王主任退休了，现在转到李医生那边看.

    The value (a name, an identifier or a title the older statement gives) is followed at once by
    a verb of leaving (``_LEFT_AFTER``); the older is stateful and the current memory nearest
    the newer (checked by the caller), and one speaker said both.
    """
    assert older.slot is not None and newer.slot is not None
    first, second = older.slot, newer.slot
    if second.weighs or second.question or first.question:
        return None
    if _stateful_pair(older, newer) is None:
        return None
    gone = said_to_leave(second, named_values(first))
    return f"value left: {gone[0].partition(':')[2]}" if gone else None


def said_to_leave(signal: Slot, values: list[str]) -> list[str]:
    """Those of ``values`` (names, identifiers) the statement names right before a verb of
    leaving (``_LEFT_AFTER``): "Priya left", 王主任退休了."""
    text = _unmasked(signal)
    if text is None:
        return []
    gone = []
    for value in values:
        name = value.partition(":")[2]
        start = text.find(name)
        while start >= 0:
            if _LEFT_AFTER.match(text[start + len(name) :].lstrip(" ")) is not None:
                gone.append(value)
                break
            start = text.find(name, start + 1)
    return gone


def corrected(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """The newer statement corrects what the older one told: "My postcode is M14 5RT" → "sorry
    I gave you the wrong postcode earlier, it's M14 5TR"; 我身高是一米七五 → 更正一下，我其实是173.

    Whatever the older statement is (an appointment told as an event is corrected too), when it
    is the current memory nearest the newer one (checked by the caller) from the same speaker,
    and the two have common ground (:func:`common_ground`, or a value both name).
    """
    assert older.slot is not None and newer.slot is not None
    first, second = older.slot, newer.slot
    if not second.corrects or first.question or second.question or second.weighs:
        return None
    vectors = _said_by_one(older, newer)
    if vectors is None or newer.kind in {"emotion", "chit_chat"}:
        return None
    # A value both name is common ground here whatever its kind: a correction names the value it
    # takes back ("40mg not 20", 175是穿鞋量的, 不在青岛).
    both_name = set(first.values) & set(second.values)
    shared = common_ground(first, second, policy) | both_name
    if not shared:
        return None
    if not both_name and not encoder_reads_both(first, second, policy):
        # Where the cosine proves nothing, the correction's own words (说错了, 之前说, 看错) are
        # no common ground: "我说错了，是2016年领的证" and "我说错了，是1月18号" share only them.
        cue = {
            ch for side in (first, second) for m in _CORRECTS.finditer(side.frame) for ch in m[0]
        }
        if not {item for item in topical(shared) if not set(item) & cue}:
            return None
    cosine = float(vectors[0] @ vectors[1])
    return f"corrected: {', '.join(sorted(shared))}; statement cosine {cosine:.3f}"


def common_ground(first: Slot, second: Slot, policy: MemoryPolicy) -> set[str]:
    """What two statements visibly share: content words, a name the first gave that the second
    says plainly ("I pay for Audible" / "cancelled audible"), and, where the encoder does not
    read the language, Chinese character pairs."""
    shared = set(_content_terms(first.terms)) & set(_content_terms(second.terms))
    second_text = second.frame.casefold()
    shared |= {
        value
        for value in first.values
        if _kind(value) in _SWITCHABLE_KINDS and value.partition(":")[2] in second_text
    }
    if not encoder_reads(second, policy):
        shared |= _bigrams(first.frame) & _bigrams(second.frame)
    return shared


def topical(shared: set[str]) -> set[str]:
    """Common ground without the Chinese character pairs made of function characters alone
    (我的, 是我, 了一): those say nothing of what two statements are about."""
    return {item for item in shared if not set(item) <= _ZH_FUNCTION_CHARACTERS}


# Pronouns, particles, the copula and light verbs.
_ZH_FUNCTION_CHARACTERS = frozenset(
    "我你他她它们的地得是了着过在有和跟与也都就还又才再这那个一不没很太吗呢吧啊呀么"
)


# -- a task's state moving on ---------------------------------------------------------------------

# Task states in the order a task passes them; blocked is a kind of "under way".
_STATE_ORDER = {"state:planned": 0, "state:in_progress": 1, "state:blocked": 1, "state:done": 2}


def state_of_patterns(text: str) -> str | None:
    """The furthest task stage the state patterns find in a text ("planned", "in_progress" —
    blocked is a kind of under way — or "done"), or None: what the stage model is compared with
    (``training.stages.train``)."""
    found = [v for v in slot_of(text).values if v in _STATE_ORDER]
    if not found:
        return None
    furthest = max(found, key=_STATE_ORDER.__getitem__).partition(":")[2]
    return "in_progress" if furthest == "blocked" else furthest


def _states(signal: Slot, policy: MemoryPolicy) -> list[str]:
    """A statement's task states: those its patterns found, else the stage model's recorded
    stage when it is at least ``stage_probability`` sure (the patterns name the stage of few
    statements written by people who never saw them: training/stages/RESULTS.md). The model's
    "none" is no state on the scale."""
    found = [v for v in signal.values if v in _STATE_ORDER]
    read = f"state:{signal.stage}"
    if found or read not in _STATE_ORDER or signal.stage_probability < policy.stage_probability:
        return found
    return [read]


def state_progress(older: Slot, newer: Slot, policy: MemoryPolicy) -> tuple[str, str] | None:
    """The older statement's earliest task state and the newer one's furthest, when it is later.

    "Halfway through the book" → "finished the book", 计划下个月开工 → 进行中 → 全部完工: a task
    moves along one scale, so the later state replaces the earlier one however the rest of the
    sentence is worded (which is why the frames need not be close, only about the same task).
    A statement no pattern finds a state in tells the stage model's (``_states``).
    """
    old, new = _states(older, policy), _states(newer, policy)
    if not old or not new:
        return None
    start = min(old, key=_STATE_ORDER.__getitem__)
    end = max(new, key=_STATE_ORDER.__getitem__)
    return (start, end) if _STATE_ORDER[end] > _STATE_ORDER[start] else None


def _named_things(signal: Slot) -> set[str]:
    return {v for v in signal.values if _kind(v) not in {*_CONTEXT_KINDS, "number", "date"}}


def state_moved_on(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """The same speaker's task, told again at a later state: the older statement is superseded.

    Same task: the statements are brief (``state_max_terms``), close as wholes
    (``state_cosine_floor``), share what the task is — a named thing (the Rust book, v2.3) or a
    quarter of their content words (nursery, 装修; in Chinese not one character: 月 of 这个月 and
    12月上线) — and do not name two subjects or two attributes (the guards of
    ``names_two_slots`` that need no values).
    """
    assert older.slot is not None and newer.slot is not None
    if older.speaker != newer.speaker or newer.kind in NEVER_UPDATES:
        return None
    if older.kind in NEVER_UPDATES or older.vector is None or newer.vector is None:
        return None
    first, second = older.slot, newer.slot
    if second.additive or first.question or second.question:
        return None
    progress = state_progress(first, second, policy)
    if progress is None:
        return None
    words = [set(_content_terms(side.terms)) for side in (first, second)]
    if max(content_word_count(first), content_word_count(second)) > policy.state_max_terms:
        return None  # a long line shares a word with many things: no evidence of one task
    in_common = words[0] & words[1]
    if not encoder_reads_both(first, second, policy):
        # One Chinese character in common says nothing of the task (月 of 这个月 / 12月上线).
        in_common = {w for w in in_common if len(w) > 1 or w.isascii()}
    if not _named_things(first) & _named_things(second) and (
        not in_common or len(in_common) * 4 < min(len(w) for w in words)
    ):
        return None  # neither a named thing nor a quarter of the words in common (and a line
        # of no content words, 那就这么定了, is about no task)
    cosine = float(older.vector @ newer.vector)
    if cosine < policy.state_cosine_floor:
        return None
    old_values, new_values = changed_values(first, second)
    if any(v in {*first.subjects, *second.subjects} for v in (*old_values, *new_values)):
        return None  # 工单OPS-3307 done / 工单OPS-3370 planned: two tasks
    # "The kitchen renovation is in progress" / "The bathroom renovation is done": two parts of
    # the work. With one word shared, only a swapped modifier says so (装修进行中，水电…，在贴砖 /
    # 装修全部完工，下周搬进去 and "still with the lawyers" / "signed this morning" differ in
    # what follows the task, not in which task).
    aligned = len(set(_content_terms(first.terms)) & set(_content_terms(second.terms))) >= 2
    frames = (first.frame, second.frame)
    if _swapped_modifier(first.terms, second.terms) or (
        aligned and _swapped_attribute(first.terms, second.terms, frames)
    ):
        return None
    return f"state: {progress[0]} -> {progress[1]}; statement cosine {cosine:.3f}"


# -- a new way to reach the same goal ------------------------------------------------------------

# A statement that opens with its goal or condition, then says what to do: "To reset the boiler,
# hold …", "When the build fails, …", "Deploys: …", "Run the tests with …", 路由器卡了就…,
# 交水电费：…, 如果下雨，….
# (At the very start: "Yeah Maria, making memories with family…" opens with a greeting.)
_GOAL_EN = re.compile(
    r"^[\s\"“'(]*(?P<goal>(?:to|when|whenever|if|for|before|after|once)\b[^,:;.!?]{3,80}?)\s*[,:;]"
    r"|^[\s\"“'(]*(?P<label>[^,:;.!?]{3,60}?)\s*:"
    r"|^[\s\"“'(]*(?P<task>[^,:;.!?…]{3,60}?)\s+(?:with|using|via)\b",  # "Run the tests with …"
    re.I,
)
_GOAL_ZH = re.compile(
    r"^[\s\"“'(（]*(?P<marker>如果|要是|每次|一旦)?(?P<goal>[^，,：:；;。！？]{2,20}?)"
    r"(?:的话|的时候|时)?"
    r"(?:[：:]|就|[，,](?=.*[，,。]))"
)


def goal_of(frame: str) -> tuple[str, bool] | None:
    """The goal or condition a statement opens with, when its shape says it has one, and whether
    the shape is a marked one (to / when / if / a label / 就); "X with Y" is unmarked."""
    if _CJK_RUN.search(frame):
        zh = _GOAL_ZH.match(frame)
        if zh is None or not (zh.group(0).endswith(("：", ":", "就")) or zh.group("marker")):
            return None
        return zh.group("goal"), True
    en = _GOAL_EN.match(frame)
    if en is None:
        return None
    marked = en.group("goal") or en.group("label")
    return (marked, True) if marked else (en.group("task"), False)


def _bigrams(text: str) -> set[str]:
    return {run[i : i + 2] for run in _CJK_RUN.findall(text) for i in range(len(run) - 1)}


def shared_pairs(first: Slot, second: Slot) -> int:
    """How many Chinese character pairs two statements share (a lexical closeness): those of
    their frames, and those of the names both give (masked in the frames: 王姐, 王主任)."""
    names = {v.partition(":")[2] for v in set(named_values(first)) & set(named_values(second))}
    return len(_bigrams(first.frame) & _bigrams(second.frame)) + len(
        set().union(*(_bigrams(name) for name in names))
    )


def encoder_reads(signal: Slot, policy: MemoryPolicy) -> bool:
    """Whether the statement's language is one the encoder's cosine can be trusted for."""
    return language_of(signal.frame) in policy.slot_cosine_languages


def encoder_reads_both(first: Slot, second: Slot, policy: MemoryPolicy) -> bool:
    """Whether the encoder's cosine between the two statements can be trusted."""
    return encoder_reads(first, policy) and encoder_reads(second, policy)


def worded_alike(first: str, second: str, policy: MemoryPolicy) -> bool:
    """Whether two texts' cosine may call them one statement told twice: in a language the
    encoder reads, yes; otherwise only when they share two thirds of the shorter one's character
    pairs. The English-only default encoder puts unrelated Chinese statements at 0.92 or more
    (我家那辆老捷达还在开 / 我家猫在用豆腐猫砂 at 0.999), where the duplicate rule merged the
    second into the first and it was lost as a memory of its own."""
    if all(language_of(text) in policy.slot_cosine_languages for text in (first, second)):
        return True
    shorter, longer = sorted((_bigrams(first), _bigrams(second)), key=len)
    return _holds_most_pairs(longer, shorter)


def _holds_most_pairs(text_pairs: set[str], pairs: set[str]) -> bool:
    """Whether ``text_pairs`` holds two thirds of ``pairs`` (at least one): two wordings of one
    thing in Chinese, whose word segmentation differs between them, share most character pairs."""
    return bool(pairs) and len(pairs & text_pairs) * 3 >= len(pairs) * 2


def _goal_in(goal: str, frame: str) -> bool:
    """The other statement names the same goal: all its words (English), most of its character
    pairs (Chinese, whose word segmentation differs between two wordings)."""
    if _CJK_RUN.search(goal):
        pairs = _bigrams(goal)
        return _holds_most_pairs(_bigrams(frame), pairs)
    words = set(_content_terms(tokenize(goal)))
    return len(words) >= 2 and words <= set(tokenize(frame))


def new_way_to(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """The same speaker gives a goal the older statement set out another way of reaching it.

    "To reset the boiler, hold the red button" → "… to reset the boiler, turn the dial to R";
    路由器卡了就拔电源 → 路由器卡了在管理页面点重启: the older statement opens with its goal or
    condition (``goal_of``), the newer one names it too, and what each says to do shares little.
    A restatement shares its method; an event ("when we visited Rome, we …") is not stateful.
    """
    assert older.slot is not None and newer.slot is not None
    if older.speaker != newer.speaker or older.vector is None or newer.vector is None:
        return None
    quiet: frozenset[Kind] = frozenset({"emotion", "chit_chat"})
    if newer.kind in quiet or older.kind in quiet:
        return None
    first, second = older.slot, newer.slot
    if older.kind != "procedure" and not is_stateful(older.kind, older.region, first):
        return None
    if second.additive or first.question or second.question or about_two_things(first, second):
        return None
    found = goal_of(first.frame)
    if found is None or not _goal_in(found[0], second.frame):
        return None
    goal, marked = found
    if not marked and content_word_count(first) > policy.state_max_terms:
        return None  # "…going to boot camps with my fam, it's good for…": a chat line, no task
    cosine = float(older.vector @ newer.vector)
    if cosine < policy.state_cosine_floor:
        return None
    goal_words = set(tokenize(goal)) | {t for t in second.terms if _bigrams(t) & _bigrams(goal)}
    # What each says to do: its words and values outside the goal ("python setup.py" / "tox").
    old_way = [t for t in _content_terms(first.terms) if t not in goal_words] + first.values
    new_way = [t for t in _content_terms(second.terms) if t not in goal_words] + second.values
    if not old_way or not new_way or term_overlap(old_way, new_way) >= policy.slot_term_overlap:
        return None
    return f"goal: {goal.strip()}; another way; statement cosine {cosine:.3f}"


# -- a switch that names the slot it changes -----------------------------------------------------

# "Switched my editor to Helix", "changed the standup to 10", 早饭换成燕麦了, 周会改到周三: the
# words before the change verb name what changed (the slot), those after it the new value. The
# verbs are the grammar of a change, as the from-phrase of ``departed_values`` is.
_SWITCH_EN = re.compile(
    r"\b(?:switched|changed|moved|swapped|upgraded|downgraded)\s+(?:my|our|the|his|her|their)?\s*"
    r"(?P<slot>[A-Za-z][\w -]{1,40}?)\s+(?:over to|to|for)\b(?P<value>.+)"
    # "Standup moved to 10:15", "The gym has moved to Elm Street": the slot before the verb.
    r"|^[\s\"“']*(?:(?:my|our|the|his|her|their)\s+)?(?P<subject>[A-Za-z][\w -]{1,40}?)\s+"
    r"(?:has |have |was |is |got )?(?:switched|changed|moved|shifted) (?:over )?to\b(?P<to>.+)",
    re.I,
)
_SWITCH_ZH = re.compile(
    r"^\W*(?:我们的|我们|我的|我|咱们)?(?P<slot>[\u4e00-\u9fff]{2,10}?)(?:都|也|已经|现在|目前|基本)?"
    r"(?:换成|换到|换为|换了|改成|改为|改到|改用|变成)(?P<value>.+)"
)


_WHO = frozenset({"i", "we", "you", "he", "she", "they", "it", "everyone", "we've", "i've"})


def switch_of(frame: str) -> tuple[str, str] | None:
    """The slot a switch names and what it says the slot now holds (None: not a switch)."""
    match = _SWITCH_ZH.match(frame) if _CJK_RUN.search(frame) else _SWITCH_EN.search(frame)
    if match is None:
        return None
    groups = match.groupdict()
    slot, value = groups.get("slot") or groups["subject"], groups.get("value") or groups["to"]
    lead = _LEADING_PRONOUN.match(slot)
    if len(slot[lead.end() if lead else 0 :].strip()) < 2 or slot.strip().casefold() in _WHO:
        return None  # 我们换了个新房子, "We moved to Leeds": who switched, not what
    return slot, value


def switched_to(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """The newer statement switches the slot the older one states: 早饭换成燕麦了 after
    我早饭一般是豆浆油条. The slot's words are the older statement's too, the value after the verb
    is new to it, both are brief (``state_max_terms``) and close as wholes."""
    assert older.slot is not None and newer.slot is not None
    vectors = _stateful_pair(older, newer)
    if vectors is None:
        return None
    first, second = older.slot, newer.slot
    if first.question or second.question or about_two_things(first, second):
        return None
    switch = switch_of(second.frame)
    if switch is None:
        return None
    slot_words, value = switch
    if not _goal_in(slot_words, first.frame) and not (
        set(_content_terms(tokenize(slot_words))) and _goal_words_in(slot_words, first.frame)
    ):
        return None
    if max(content_word_count(first), content_word_count(second)) > policy.state_max_terms:
        return None
    new_words = set(_content_terms(tokenize(value))) - set(first.terms)
    if not new_words and not set(second.values) - set(first.values):
        return None  # the value it switches to is the one the older statement gives
    cosine = float(vectors[0] @ vectors[1])
    if cosine < policy.state_cosine_floor:
        return None
    return f"switch: {slot_words.strip()}; statement cosine {cosine:.3f}"


def _goal_words_in(words: str, frame: str) -> bool:
    """Every content word of ``words`` (at least one) is in ``frame``."""
    wanted = set(_content_terms(tokenize(words)))
    return bool(wanted) and wanted <= set(tokenize(frame))


# -- one entity, named alike ----------------------------------------------------------------------


def named_alike(older: Statement, newer: Statement) -> tuple[Statement, Statement]:
    """Both statements name one entity even where only one side's spans caught it.

    "My sister Leila lives in Porto" / "Leila lives in Lyon": a sentence's first word is never
    taken for a name on its own, so "Leila" is a name on the older side and a plain word on the
    newer. A name (or identifier) one side holds as a value that the other side says as a word is
    the same value on both sides: moved from the other side's words to its values, it is no
    longer a changed value nor a swapped attribute word.
    """
    assert older.slot is not None and newer.slot is not None
    first, second = _named_from(older.slot, newer.slot), _named_from(newer.slot, older.slot)
    if first is older.slot and second is newer.slot:
        return older, newer
    return replace(older, slot=first), replace(newer, slot=second)


def _named_from(side: Slot, other: Slot) -> Slot:
    """``side`` with the other side's names that it says as plain words added to its values."""
    terms = set(side.terms)
    found: list[tuple[str, list[str]]] = []
    for value in other.values:
        if _kind(value) not in _SWITCHABLE_KINDS or value in side.values:
            continue
        words = tokenize(value.split(":", 1)[1])
        if words and set(words) <= terms:
            found.append((value, words))
    if not found:
        return side
    said = {word for _, words in found for word in words}
    return side.model_copy(
        update={
            "values": [*side.values, *(value for value, _ in found)],
            "terms": [t for t in side.terms if t not in said],
        }
    )


# -- a new value told in plain words ------------------------------------------------------------


def _attribute_head(frame: str) -> str | None:
    """The last content word before an English statement's copula: what "My go-to editor is Vim"
    or "The wifi at the cabin is …" gives a value to (None: no copula, or nothing before it)."""
    match = re.search(r"\b(?:is|are|was|were)\b", frame, re.I)
    if match is None:
        return None
    before = _content_terms(tokenize(frame[: match.start()]))
    return before[-1] if before else None


def value_in_words(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """The newer statement gives the older one's slot a value no span catches.

    "My go-to editor is Vim" → "Helix has completely won me over, the only editor I open";
    "always request a vegetarian meal" → "kindly request the gluten-free meal"; 我周末都去爬山 →
    周末基本泡在羽毛球馆. The values are plain words, so the frames are not masked alike and the
    slot rule cannot see one slot. The evidence here is the statements as wholes:

    * what they share is the slot: at least one content word in common, and each side has words
      (or span values) of its own, the old value and the new one — the newer at least two, for a
      statement that only names the topic again ("Back on the billing migration") says nothing
      of it;
    * a span value both hold is an entity both name (a name, an identifier: "Leila"), never an
      amount, a date or a state said again; with one, its other values change; span values of one
      class changing on both sides must change in one attribute (``names_two_slots``: 我哥住在南京
      / 我哥在苏州上班), while values of two classes are side remarks (二十分钟 / 《西游记》);
    * both brief (``state_max_terms``), and the older is the current memory closest to the newer
      one (``nearest``, checked by the caller): of several facts about a subject, only the one it
      speaks to;
    * said in another conversation: within one, the lines after a fact that share a word with it
      go on about the topic ("My blood type is B positive", then "Blood test results take three
      days"; "The staging API key is …", then "The staging URL is …");
    * English (an encoder that reads it): the statements are close (``state_cosine_floor``) but
      not so close that they say the same thing (``restatement_cosine``: "I drink my coffee black"
      / "Black coffee, no sugar, always"); when the older says its attribute before a copula ("My
      go-to editor is Vim"), the newer names the attribute's head (editor); otherwise they name
      one entity, or share three words when neither names a value (a state or a time is no
      value: LoCoMo's chat lines "Thanks! … let me know" share two), or two words, or one that
      is what the newer's copula gives its value as ("Whenever I code I put on jazz" / "Lo-fi
      playlists are my coding soundtrack"). Elsewhere
      the cosine proves nothing, so the shared words must be what both open with (the topic
      comes first) and be two at least, the topic and its attribute (孩子睡前…): one word in
      common is a topic with many attributes (我女儿今年上初二 / 我女儿在读中央美院, 我每天晚饭后
      快走 / 我每天早上打太极, 公司前台密码 / 公司搬家了), and one user says many such lines;
    * a stated preference gives way only to another preference or a decision: a fact that
      mentions the liked thing ("cilantro is in like every taco at that place") replaces nothing;
    * no swapped modifier (breakfast / lunch, 早饭 / 午饭) and no differing subject.
    """
    assert older.slot is not None and newer.slot is not None
    vectors = _stateful_pair(older, newer)
    if vectors is None:
        return None
    if older.session is None or older.session == newer.session:
        return None  # within one conversation, a line sharing a word goes on about the topic
    if "episodic" in {older.region, newer.region}:
        return None  # an event (what happened, when) holds no value that words could replace
    first, second = older.slot, newer.slot
    if second.additive or second.moment or first.question or second.question:
        return None
    if older.kind == "preference" and newer.kind not in {"preference", "decision"}:
        return None  # a liking gives way to another liking, not to a fact about the liked thing
    both_name = set(first.values) & set(second.values)
    if any(_kind(v) not in _SWITCHABLE_KINDS for v in both_name):
        return None  # an amount, a date or a state said again: no change of value
    old_values, new_values = changed_values(first, second)
    if both_name and (not old_values or not new_values):
        return None  # one entity both name (Leila) and nothing else of it changed
    if (
        old_values
        and new_values
        and (both_name or not _classes_differ(old_values, new_values))
        and names_two_slots(first, second, old_values, new_values)
    ):
        return None  # span values of one class changed in another attribute (住 / 上班)
    things = [_kinds_of(tuple(side.values)) & _SWITCHABLE_KINDS for side in (first, second)]
    if things[0] and not things[1] and _kinds_of(new_values) & {"date", "ordinal"}:
        return None  # the thing it named gave way to a date: another attribute ("My dentist is
        # Dr. Hughes" / "My dentist appointment is on the 3rd")
    if _counted_apart(first, second, old_values, new_values) or _heads_differ(first, second):
        return None
    words = [_content_terms(side.terms) for side in (first, second)]
    if max(content_word_count(first), content_word_count(second)) > policy.state_max_terms:
        return None
    shared = set(words[0]) & set(words[1])
    old_own = [t for t in words[0] if t not in shared] + list(old_values)
    new_own = [t for t in words[1] if t not in shared] + list(new_values)
    if not shared or not old_own or len(new_own) < 2:
        return None  # "Back on the billing migration": the topic again, and nothing said of it
    cosine = float(vectors[0] @ vectors[1])
    if cosine < policy.state_cosine_floor:
        return None
    if encoder_reads_both(first, second, policy):
        if cosine >= policy.restatement_cosine:
            return None
        head = _attribute_head(first.frame)
        if head is not None and head not in second.terms:
            return None  # "My blood type is …" / "Blood test results take three days": not its type
        named = [v for v in (*old_values, *new_values) if _kind(v) not in _CONTEXT_KINDS]
        if head is None and not both_name:
            if not named and len(shared) < 3:
                return None  # no attribute said and no value named: chat lines ("Thanks! Let me
                # know how it goes" / "… let me know if you need anything") share two words
            if len(shared) < 2 and not shared <= _predicate_terms(second.frame):
                return None  # one word in common: "i hate cilantro" / "the cilantro gene thing
                # is real" share the value, not the slot (unless the newer gives it as what its
                # value is: "Lo-fi playlists are my coding soundtrack")
    elif not (len(distinct_words(shared)) >= 2 and {words[0][0], words[1][0]} <= shared):
        return None  # one word in common is a topic, not a slot (我女儿… / 我女儿…)
    if _swapped_modifier(first.terms, second.terms):
        return None
    if any(v in {*first.subjects, *second.subjects} for v in (*first.values, *second.values)):
        return None
    return (
        f"words: {', '.join(sorted(shared))}; {', '.join(old_own)} -> {', '.join(new_own)}; "
        f"statement cosine {cosine:.3f}"
    )


# -- one attribute, by meaning -------------------------------------------------------------------

# A statement with more content words than this is a chat line that tells several things: the
# attribute model reads the one it saw most (LoCoMo's long lines about a book, a show), so it is
# not asked about it (and its second encoder is spared: 27 % of LoCoMo dev's statements).
ATTRIBUTE_MAX_TERMS = 15


def names_one_slot(signal: Slot) -> bool:
    """Whether a statement is brief enough for the attribute model to name its one slot."""
    return len(_content_terms(signal.terms)) <= ATTRIBUTE_MAX_TERMS


def given_attributes(signal: Slot, chance: float = 0.0) -> list[str]:
    """The single-valued attributes a statement may give a value of, as the bank indexes it and
    looks up its update candidates: those of its recorded distribution, or its argmax alone in a
    record of an older build.

    ``chance``: only attributes that could take part in a chance that high. Of n shared terms
    one is at least chance / n, and each probability bounds its term, so an attribute below
    chance / (the list's length) can reach it only beside another that is above."""
    if signal.attribute_shares is None:
        single = signal.attribute is not None and signal.single_valued
        return [signal.attribute] if single and signal.attribute is not None else []
    floor = chance / max(len(signal.attribute_shares), 1)
    return [
        s.attribute for s in signal.attribute_shares if s.single_valued and s.probability >= floor
    ]


def same_attribute(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """The attribute model reads both statements as values of one attribute that a person holds
    one value of at a time, and the newer gives another value.

    "My go-to editor is Vim" → "Helix has completely won me over, it's the only editor I open";
    "I drive to work in my old Corolla" → "ditched the car, the bike is faster through town";
    我周末都去爬山 → 周末基本泡在羽毛球馆: no value in common and often no word, but one attribute
    (``Slot.attribute``, recorded by ``prepare`` from ``pipeline/models/attributes.py``). What
    the model cannot know, the statements' structure still says:

    * both give one single-valued attribute (``attribute_chance.one_attribute``): by the
      chance from the distributions ``prepare`` recorded, at least ``attribute_chance``; in
      records of older builds, by both argmaxes, each at least ``attribute_probability`` sure
      (hobbies, friends or allergies add up: a new one replaces none);
    * one speaker, the older stateful, the newer of a kind that updates (``_stateful_pair``);
      neither is a question, and the newer does not add ("also", 也) — weighing and keeping
      words were checked by the caller;
    * the same people on both sides (my brother's city is not mine) and in another conversation
      (within one, the lines after a statement go on about it);
    * another value: span values replaced on both sides, or, with none replaced, words of its own
      on each side and no value both name said again ("My editor is Vim" / "Still Vim, new
      config"); where the encoder reads the language, the two are not so close that they say
      the same thing (``restatement_cosine``).
    """
    assert older.slot is not None and newer.slot is not None
    first, second = older.slot, newer.slot
    read = one_attribute(first, second, policy.attribute_chance, policy.attribute_probability)
    if read is None:
        return None
    if second.additive or second.question or first.question:
        return None
    if older.session is None or older.session == newer.session:
        return None
    if _people(first) != _people(second):
        return None
    vectors = _stateful_pair(older, newer)
    if vectors is None:
        return None
    old_values, new_values = changed_values(first, second)
    words = [_content_terms(side.terms) for side in (first, second)]
    if content_word_count(first) > policy.state_max_terms:
        return None  # a long chat line tells many things; the model read the one it saw most
    shared = set(words[0]) & set(words[1])
    old_own = [t for t in words[0] if t not in shared] + list(old_values)
    new_own = [t for t in words[1] if t not in shared] + list(new_values)
    if not (old_values and new_values):
        if set(first.values) & set(second.values):
            return None  # a value both name, said again with more or less around it
        if not old_own or not new_own:
            return None  # one says all the other does: an elaboration, not another value
    cosine = float(vectors[0] @ vectors[1])
    reads = encoder_reads_both(first, second, policy)
    if reads and cosine >= policy.restatement_cosine and not (old_values and new_values):
        return None  # the same thing in other words ("I drink my coffee black" / "Black coffee")
    return (
        f"attribute: {read.attribute} ({read.why}); {', '.join(old_own)} -> {', '.join(new_own)}; "
        f"statement cosine {cosine:.3f}"
    )


# -- an amount of the same thing ----------------------------------------------------------------

_UNIT_AFTER = re.compile(r"[\u4e00-\u9fff]{1,3}|[A-Za-z]+")


# "£5 a week", "60 per month": the unit is the word after the article.
_PER = re.compile(r"^(?:a|an|per|each|every)\s+(?=[A-Za-z])", re.I)


def _number_units(signal: Slot) -> dict[str, str]:
    """Each number value's unit: the word right after its mask in the frame (个人, 刀, people);
    none when the masks are ambiguous (``_masks_filled``)."""
    masked = _masks_filled(signal)
    if masked is None:
        return {}
    units: dict[str, str] = {}
    for value, after in masked[1]:
        rate = _PER.match(after.lstrip(" "))
        found = _UNIT_AFTER.match(after.lstrip(" ")[rate.end() if rate else 0 :])
        # A unit is a word of its own ("… people", 个人), not grammar ("ending … is my card").
        if _kind(value) == "number" and found is not None and tokenize(found.group(0)):
            units[value] = ("per " if rate else "") + found.group(0).casefold()
    return units


def _common_unit(first: str, second: str) -> str:
    """The unit two amounts share: 个人 / 个人了, 刀 / 刀左 (a CJK unit runs into the next word, so
    the shorter need only begin the longer); English words must match whole. A measure word
    followed by two different nouns counts two things (个员工 / 个会议室): no unit."""
    if first.isascii() or second.isascii():
        return first if first == second else ""
    short, long = sorted((first, second), key=len)
    return short if long.startswith(short) else ""


def quantity_changed(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """A new amount of the same thing: one number each side changed, counted in the same unit,
    of something both name. 跑团微信群有86个人 → 跑团群涨到132个人了; AWS每月账单大概1800刀 →
    账单压到1100刀左右.

    The frames need not be close (the word segmenter splits 跑团微信群 and 跑团群 apart, and the
    newer one says more), so the evidence is the unit after each number and a word (for Chinese,
    a character pair) both share besides it. Not when the changed value names what each is about
    (北京办公室有40个人 / 上海办公室有12个人) or a time changed with it.
    """
    assert older.slot is not None and newer.slot is not None
    vectors = _stateful_pair(older, newer)
    if vectors is None:
        return None
    first, second = older.slot, newer.slot
    if second.additive or first.question or second.question:
        return None
    if older.region == "episodic":
        return None  # an event with its amount (交了电费84块) stays true after another one
    old_values, new_values = changed_values(first, second)
    if any(_VALUE_CLASSES.get(_kind(v)) == "when" for v in old_values) and any(
        _VALUE_CLASSES.get(_kind(v)) == "when" for v in new_values
    ):
        return None  # a time changed with the amount: another occasion
    if any(v in {*first.subjects, *second.subjects} for v in (*old_values, *new_values)):
        return None
    # The amounts that changed, counted in one unit ("Ava turned ten so her pocket money went
    # up to £8 a week": ten is her age, £8 the amount of the older "£5 a week").
    old_units, new_units = _number_units(first), _number_units(second)
    counted = [
        (old, new, unit)
        for old in old_values
        if old in old_units
        for new in new_values
        if new in new_units and (unit := _common_unit(old_units[old], new_units[new]))
    ]
    if len(counted) != 1:
        return None
    old_number, new_number, unit = counted[0]
    old_numbers, new_numbers = [old_number], [new_number]
    words = [set(_content_terms(side.terms)) for side in (first, second)]
    rate = unit.startswith("per ")
    # Besides the units of the amounts (年 of 十年了 and 三年了, 月 of 5月): what is counted.
    units = {unit, *(t for u in (*old_units.values(), *new_units.values()) for t in tokenize(u))}
    shared = (words[0] & words[1]) - units
    if content_word_count(first) > policy.state_max_terms:
        return None  # an amount stated as a state is brief; a long chat line holds no such slot
    if content_word_count(second) > policy.state_max_terms and len(shared) < 2:
        return None  # a long newer line sharing one word: no evidence of one thing counted
    pairs = (_bigrams(first.frame) & _bigrams(second.frame)) - _bigrams(unit)
    if _swapped_modifier(first.terms, second.terms):
        return None  # "I run 20 km a week" / "I swim 2 km a week": one unit, two things counted
    if not shared and not pairs:
        return None
    if rate and len(shared) < 2:
        return None  # a rate says how often, not what is counted: "We pay 60 a month for
        # broadband" / "We pay 40 a month for the phone contract" share only the paying
    cosine = float(vectors[0] @ vectors[1])
    if cosine < policy.state_cosine_floor:
        return None
    return (
        f"quantity: {old_numbers[0]} -> {new_numbers[0]} {unit}; "
        f"shared {', '.join(sorted(shared | pairs))}; statement cosine {cosine:.3f}"
    )


# -- a value given after the copula ------------------------------------------------------------

# What joins a statement's subject to its value when the value follows at once: "Mia is …",
# "staging db host: …", "gym membership = …", "Theo turned …", 家庭医生是…. Grammar, not a cue.
_VALUE_JOIN = re.compile(r"\b(?:is|are|was|were|am|turned|became)\b|[:=]|是|为", re.I)
# Words that may stand between the join and the value without saying anything of their own.
_BEFORE_VALUE = frozenset(
    tokenize("at in on a an the now still just about around roughly only all set to by called")
)


def _subject_and_value(signal: Slot) -> tuple[list[str], bool] | None:
    """The words before the statement's first join (its subject, with each mask read as the
    value it stands for) and whether a value follows the join at once (None: no join)."""
    match = _VALUE_JOIN.search(signal.frame)
    if match is None:
        return None
    before, after = signal.frame[: match.start()], signal.frame[match.end() :]
    masks = signal.frame.count(MASK)
    readable = masks == len(signal.values)
    words: list[str] = []
    index = 0
    for piece in re.split(f"({re.escape(MASK)})", before):
        if piece == MASK:
            if readable:
                words += tokenize(signal.values[index].split(":", 1)[1])
            index += 1
        else:
            words += _content_terms(tokenize(piece))
    rest = after.lstrip()
    first_words = re.split(f"({re.escape(MASK)})", rest, maxsplit=1)
    value_first = len(first_words) > 1 and all(
        word in _BEFORE_VALUE for word in tokenize(first_words[0])
    )
    return words, value_first


def value_after_join(older: Statement, newer: Statement, policy: MemoryPolicy) -> str | None:
    """Both statements give their subject a value right after the join, the subject's last word
    (its head: what the value is of) is the same, and the value changed within one class.

    "My daughter Mia is 4" → "Mia is five and very proud of it"; "wifi password is …" → "wifi pw
    is …"; "The landlord is Mr. Fenwick" → "The landlord is a company called Harbour Lettings".
    The rest of the sentences may be worded anew: the subject and the join say which slot. Both
    are said in two conversations, and no side names its subject with words the other lacks.
    "My daughter Mia is 4" / "My son Leo is 7" name two heads; "The API timeout is 30 s" / "The
    DB timeout is 10 s" swap a modifier of one head: two slots.
    """
    assert older.slot is not None and newer.slot is not None
    vectors = _stateful_pair(older, newer)
    if vectors is None:
        return None
    if older.session is None or older.session == newer.session:
        return None  # within one conversation, two such lines list two things (work / home phone)
    first, second = older.slot, newer.slot
    if second.additive or first.question or second.question or about_two_things(first, second):
        return None
    old_side, new_side = _subject_and_value(first), _subject_and_value(second)
    if old_side is None or new_side is None:
        return None
    (old_subject, old_first), (new_subject, new_first) = old_side, new_side
    if not (old_first and new_first and old_subject and new_subject):
        return None
    head_old, head_new = old_subject[-1], new_subject[-1]
    if head_old != head_new and not _one_word(head_old, head_new):
        return None
    old_own, new_own = _unmatched(old_subject, new_subject), _unmatched(new_subject, old_subject)
    if old_own and new_own:
        return None  # "old work phone number" / "personal phone number": two of them
    old_values, new_values = changed_values(first, second)
    old_values = tuple(v for v in old_values if not set(tokenize(v.split(":", 1)[1])) & {head_old})
    new_values = tuple(v for v in new_values if not set(tokenize(v.split(":", 1)[1])) & {head_new})
    if not old_values or not new_values or _classes_differ(old_values, new_values):
        return None
    if any(v in {*first.subjects, *second.subjects} for v in (*old_values, *new_values)):
        return None
    if _counted_apart(first, second, old_values, new_values):
        return None  # "The team is 9 engineers" / "The team is 3 designers"
    cosine = float(vectors[0] @ vectors[1])
    if cosine < policy.state_cosine_floor:
        return None
    return (
        f"value of {head_new}: {', '.join(old_values)} -> {', '.join(new_values)}; "
        f"statement cosine {cosine:.3f}"
    )


def _unmatched(words: list[str], other: list[str]) -> list[str]:
    """The words of ``words`` that ``other`` has in no form (db / database are one word)."""
    return [w for w in words if not any(w == o or _one_word(w, o) for o in other)]


def _counted_apart(
    first: Slot, second: Slot, old_values: tuple[str, ...], new_values: tuple[str, ...]
) -> bool:
    """Both sides changed an amount, each counted in a unit of its own (八千步 / 七个小时, "40
    minutes" / "8 pounds"): two attributes. Amounts without a unit say nothing either way."""
    old_units = {u for v, u in _number_units(first).items() if v in old_values}
    new_units = {u for v, u in _number_units(second).items() if v in new_values}
    if not old_units or not new_units:
        return False
    return not any(_common_unit(a, b) for a in old_units for b in new_units)


def _heads_differ(first: Slot, second: Slot) -> bool:
    """Both give a value right after the join, to subjects with different heads (孩子的班主任是…
    / 孩子的英语老师是…): two attributes of what they share."""
    sides = _subject_and_value(first), _subject_and_value(second)
    if sides[0] is None or sides[1] is None:
        return False
    (old_subject, old_first), (new_subject, new_first) = sides[0], sides[1]
    if not (old_first and new_first and old_subject and new_subject):
        return False
    return old_subject[-1] != new_subject[-1] and not _one_word(old_subject[-1], new_subject[-1])
