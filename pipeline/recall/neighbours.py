"""Conversational context at recall time: a reply inherits the words of the turn it answers.

A question and its answer are two turns: "What did you research?" / "Adoption agencies - it's
been a long road." The answer holds the fact but not the question's words, so keyword recall
finds the question and misses the answer. Here every lexical hit passes part of its match on to
the memory that directly follows it in the same session and topic segment.

A problem and its fix are two turns of one speaker too: "The car wouldn't start that freezing
morning." / "Jump-started it off the neighbour's van." For a question about how something was
done or fixed (``own_continuation``), the speaker's own next statement inherits as well, unless
the hit is a procedure itself: then it is the answer, and what follows it is the next topic
("卤牛肉的做法：…" / "红烧鱼：…").

Done at recall time instead of copying the previous turn's text into a memory's search text:
stored copies would keep a forgotten or erased memory's words inside its neighbour (I8), and
would change the vectors that deduplication and segmentation compare.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from pipeline.recall.conversation import SAME_SITTING
from pipeline.recall.hot_index import NamespaceView
from pipeline.recall.lexical import LexicalHit
from pipeline.recall.temporal import TimeWindow

# A reply further away than this from the turn before it is not read as its answer.
FOLLOW_UP_WITHIN = SAME_SITTING


def follow_ups(
    view: NamespaceView,
    hits: Sequence[LexicalHit],
    accept: Callable[[str], bool],
    share: float,
    within: timedelta = FOLLOW_UP_WITHIN,
    own_continuation: bool = False,
) -> list[tuple[str, float]]:
    """``(memory id, inherited coverage)`` of the memory right after each hit, in hit order.

    "Right after" means the next memory in time of the same session, if it is in the same topic
    segment, within ``within`` and said by someone else (a reply; a speaker's next statement is
    often about something else: "My daughter starts kindergarten in September." / "We changed
    the car battery last weekend."), or by anyone when ``own_continuation`` and the hit is no
    procedure (the question asks how something was done, and a fix follows its problem). It
    inherits ``share`` × the hit's coverage. Each memory is listed once, from the best-ranked hit
    before it.
    """
    found: dict[str, float] = {}
    for hit in hits:
        record = view.records.get(hit.memory_id)
        if record is None or not record.provenance:
            continue
        session = record.provenance[0].session_id
        speaker = record.provenance[0].speaker
        own = own_continuation and record.kind != "procedure"
        after = record.created_at + timedelta(microseconds=1)
        for memory_id in view.ids_in_window(TimeWindow(after, record.created_at + within)):
            follower = view.records[memory_id]
            if not follower.provenance or follower.provenance[0].session_id != session:
                continue  # another session interleaved in time
            if (
                follower.segment_id == record.segment_id
                and (own or follower.provenance[0].speaker != speaker)
                and accept(memory_id)
            ):
                found.setdefault(memory_id, share * hit.coverage)
            break
    return list(found.items())
