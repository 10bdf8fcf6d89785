"""A seeded corpus of chat in several scripts, for search recall (tests and ``bench/search_recall.py``).

English with code identifiers, Chinese and Japanese written without spaces, Korean with
particles attached to the word, and messages that mix them. :func:`expected` says which
messages a query must find: those that contain it (ignoring case) — the contract of
search for a CJK word or a term of three characters or more.
"""

from __future__ import annotations

import random

ENGLISH = [
    "the",
    "deploy",
    "failed",
    "again",
    "after",
    "we",
    "changed",
    "the",
    "config",
    "and",
    "restarted",
    "every",
    "service",
    "please",
    "check",
    "the",
    "logs",
    "for",
    "errors",
    "before",
    "the",
    "meeting",
    "tomorrow",
    "morning",
    "with",
    "the",
    "team",
]
IDENTIFIERS = [
    "getUserProfileById",
    "parseConfigFile",
    "HttpRequestHandler",
    "maxRetryCount",
    "fetchUserData",
    "renderTemplate",
    "DatabaseConnectionPool",
]
CHINESE = ["我们", "今天", "讨论", "数据库", "设计", "问题", "服务器", "部署", "用户", "配置", "错误", "日志"]
JAPANESE = ["これは", "カタカナ", "テスト", "です", "サーバー", "データ", "設定", "確認", "ひらがな", "の"]
KOREAN = ["서울", "데이터", "서버", "설정", "확인", "내일"]
PARTICLES = ["에서", "를", "는", "가", "도"]

QUERIES = [
    # CJK words, two characters and more, inside sentences
    "数据",
    "数据库",
    "服务",
    "日志",
    "カタカナ",
    "サーバー",
    "テスト",
    "設定",
    "서울",
    "데이터",
    # parts of identifiers and of words
    "UserProfile",
    "config",
    "RetryCount",
    "request",
    "connectionpool",
    "template",
    "ploy",
    # whole words
    "deploy",
    "errors",
    "meeting",
]


def _sentence(rng: random.Random) -> str:
    style = rng.randrange(5)
    if style == 0:
        words = rng.choices(ENGLISH, k=rng.randint(4, 12))
        words.insert(rng.randrange(len(words) + 1), rng.choice(IDENTIFIERS) + "()")
        return " ".join(words)
    if style == 1:
        return "".join(rng.choices(CHINESE, k=rng.randint(3, 8))) + "。"
    if style == 2:
        return "".join(rng.choices(JAPANESE, k=rng.randint(3, 7))) + "。"
    if style == 3:
        return " ".join(w + rng.choice(PARTICLES) for w in rng.choices(KOREAN, k=rng.randint(2, 5)))
    return "".join(rng.choices(CHINESE, k=2)) + rng.choice(IDENTIFIERS) + "".join(rng.choices(JAPANESE, k=2))


def mixed_messages(count: int, seed: int = 9) -> list[str]:
    """``count`` messages of one or two sentences each."""
    rng = random.Random(seed)
    return [" ".join(_sentence(rng) for _ in range(rng.randint(1, 2))) for _ in range(count)]


def expected(messages: list[str], query: str) -> set[int]:
    """Indexes of the messages that contain ``query``, ignoring case."""
    wanted = query.casefold()
    return {i for i, text in enumerate(messages) if wanted in text.casefold()}
