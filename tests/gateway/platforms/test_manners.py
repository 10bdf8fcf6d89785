"""BotManners: other bots' messages answered only when configured, and only so many in a row."""

from __future__ import annotations

from gateway.platforms.base import InboundMessage
from gateway.platforms.manners import BotManners


def said(text: str, *, bot: bool, chat: str = "c1", addressed: bool = True) -> InboundMessage:
    return InboundMessage(
        "telegram", chat, "9" if bot else "1", text, chat_type="group", addressed=addressed, from_bot=bot
    )


def test_a_bot_is_not_answered_when_answer_bots_is_off() -> None:
    manners = BotManners(answer_bots=False, max_consecutive=3)
    assert manners.judge(said("hi", bot=True)).addressed is False


def test_a_persons_message_is_never_changed() -> None:
    manners = BotManners(answer_bots=False, max_consecutive=0)
    msg = said("hi", bot=False)
    assert manners.judge(msg) is msg


def test_the_streak_is_per_chat_and_a_person_resets_it() -> None:
    manners = BotManners(answer_bots=True, max_consecutive=2)
    answered = [manners.judge(said(str(n), bot=True)).addressed for n in range(3)]
    assert answered == [True, True, False]
    assert manners.judge(said("elsewhere", bot=True, chat="c2")).addressed is True
    manners.judge(said("a person", bot=False, addressed=False))
    assert manners.judge(said("again", bot=True)).addressed is True


def test_an_unaddressed_bot_message_does_not_count() -> None:
    manners = BotManners(answer_bots=True, max_consecutive=1)
    manners.judge(said("chatter", bot=True, addressed=False))
    assert manners.judge(said("to us", bot=True)).addressed is True
