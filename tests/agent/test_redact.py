"""Secrets never survive redaction, wherever they sit in a line: a table of the shapes seen in the wild,
applied to log records and to what the summarizer writes."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from agent import redact as redact_rules
from agent.compaction import compact
from agent.engines.compressor.engine import ContextCompressor
from agent.redact import REDACTED, redact
from agent.types import AgentSession
from gateway.logging_setup import JsonFormatter, RedactingFilter
from tests.agent.conftest import CANNED_SUMMARY, ScriptedSummarizer, conversation, persist
from tests.fakes.memory_store import InMemoryStore

TELEGRAM = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"
PEM_BODY = "MIIEowIBAAKCAQEA7bq3g4Jk1mN0pQ2rS5tU8vW9xY0zA1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tU1vW2x"

# (name, text as it appears, the secret part that must disappear)
SHAPES: list[tuple[str, str, str]] = [
    (
        "anthropic key",
        "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
        "abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    (
        "openai project key",
        "OPENAI sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
        "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    ),
    ("stripe live key", "charge with sk_live_51HqLyjWDarjtT1zdp7dcXsK0nR3q", "51HqLyjWDarjtT1zdp7dcXsK0nR3q"),
    ("stripe test key", "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    ("stripe restricted key", "rk_live_51HqLyjWDarjtT1zdp7dcXsK", "51HqLyjWDarjtT1zdp7dcXsK"),
    ("stripe webhook secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLSgH", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLSgH"),
    (
        "google api key",
        "maps AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe here",
        "SyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
    ),
    ("google oauth secret", "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", "1r0aNcG8gddWyEgR6RWaAiJKr2SW"),
    ("google access token", "ya29.a0AfH6SMBx3Jk9lQe4-Tz8vWq1Ys5Rn", "a0AfH6SMBx3Jk9lQe4-Tz8vWq1Ys5Rn"),
    (
        "github classic token",
        "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",
        "wWPw5k4aXcaT4fNP0UcnZwJUVFk6LO0pINUx",
    ),
    (
        "github oauth token",
        "gho_16C7e42F292c6912E7710c838347Ae178B4a",
        "16C7e42F292c6912E7710c838347Ae178B4a",
    ),
    (
        "github fine-grained",
        "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEF0123456789abcdefghijklmnop",
        "11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEF0123456789",
    ),
    ("gitlab token", "glpat-xxxxXXXX1234yyyyZZZZ", "xxxxXXXX1234yyyyZZZZ"),
    ("slack bot token", "xoxb-2634512345-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    ("slack user token", "xoxp-2634512345-2634512345-1234567890123-0123456789abcdef", "0123456789abcdef"),
    ("slack app token", "xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef", "abcdef0123456789abcdef"),
    (
        "slack webhook",
        "https://hooks.slack.com/services/T0ABCDEFG/B0ABCDEFG/AbCdEfGhIjKlMnOpQrStUvWx",
        "AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    ("aws access key id", "AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("aws secret key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("aws secret in json", '{"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCY"}', "wJalrXUtnFEMI"),
    (
        "rsa private key",
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        PEM_BODY,
    ),
    (
        "openssh private key",
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----",
        PEM_BODY,
    ),
    ("pkcs8 key cut short", f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}", PEM_BODY),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    (
        "telegram bot token",
        f"POST http://127.0.0.1:8081/bot{TELEGRAM}/getUpdates",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
    ),
    (
        "discord bot token",
        "MTA4NjQyNjg5NDg0NTk4NzczMg.GZx1aB.abcdefghijklmnopqrstuvwxyz0123456789AB",
        "abcdefghijklmnopqrstuvwxyz0123456789AB",
    ),
    (
        "discord webhook",
        "https://discord.com/api/webhooks/1234567890/AbC-dEf_GhIjKlMnOpQrStUvWxYz0123456789abcdefghij",
        "AbC-dEf_GhIjKlMnOpQrStUvWxYz0123456789abcdefghij",
    ),
    ("json token pair", 'config {"token": "tk-9f8e7d6c5b4a39281706"}', "tk-9f8e7d6c5b4a39281706"),
    ("json api_key pair", '{"api_key":"a1b2c3d4e5f6g7h8i9j0"}', "a1b2c3d4e5f6g7h8i9j0"),
    ("json password pair", '{"user": "ann", "password": "correct horse battery"}', "correct horse battery"),
    ("json client secret", '"client_secret": "Zx9Yw8Xv7Wu6Vt5Us4"', "Zx9Yw8Xv7Wu6Vt5Us4"),
    ("env line", "TELEGRAM_BOT_TOKEN=987654:ZyXwVuTsRqPoNmLkJiHgFeDcBa", "ZyXwVuTsRqPoNmLkJiHgFeDcBa"),
    ("yaml admin token", "admin_token: s3cr3t-admin-value-42", "s3cr3t-admin-value-42"),
    ("query string", "GET /callback?code=1&access_token=Qw3rTy7UiOp9AsDf&x=2", "Qw3rTy7UiOp9AsDf"),
    ("bearer header", "Authorization: Bearer abcdefghijklmnop.qrstuvwxyz", "abcdefghijklmnop.qrstuvwxyz"),
    ("basic header", "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "dXNlcjpwYXNzd29yZDEyMw=="),
    ("x-api-key header", "x-api-key: 0f1e2d3c4b5a69788796a5b4", "0f1e2d3c4b5a69788796a5b4"),
    ("url password", "postgresql+psycopg://app:hunter2secret@db:5432/h", "hunter2secret"),
    ("huggingface token", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
    ("npm token", "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    (
        "sendgrid key",
        "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",
        "TwL2iGABf9DHoTf",
    ),
    ("pypi token", "pypi-AgEIcHlwaS5vcmcCJGE4ZjM2NTk3LTY5ZjUtNDk", "AgEIcHlwaS5vcmcCJGE4ZjM2NTk3LTY5ZjUtNDk"),
    (
        "digitalocean token",
        "dop_v1_4f6e9a2b8c1d7e3f5a9b2c8d1e7f3a5b9c2d8e1f7a3b5c9d2e8f1a7b3c5d9e2f",
        "4f6e9a2b8c1d7e3f5a9b2c8d1e7f3a5b9c2d8e1f7a3b5c9d2e8f1a7b3c5d9e2f",
    ),
    ("url password with @", "postgresql://app:p@ss@w0rd@db:5432/h", "ss@w0rd"),
    ("url password, empty user", "redis://:hunter2secret@cache:6379/0", "hunter2secret"),
    (
        "url-encoded telegram token",
        "GET /hook?u=https%3A%2F%2Fapi.telegram.org%2Fbot123456789%3AAAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
    ),
    (
        "telegram token, 13-digit bot id",
        "bot1234567890123:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0/getMe",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
    ),
    ("bare aws secret key", "creds wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY in the file", "K7MDENG/bPxRfiCY"),
    (
        "azure account key",
        "AccountName=x;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsu==;",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsu",
    ),
]
IDS = [name for name, _, _ in SHAPES]


def test_the_table_has_at_least_thirty_shapes() -> None:
    assert len(SHAPES) >= 30


@pytest.mark.parametrize(("name", "text", "secret"), SHAPES, ids=IDS)
def test_a_secret_is_redacted(name: str, text: str, secret: str) -> None:
    cleaned = redact(text)
    assert secret not in cleaned, cleaned
    assert REDACTED in cleaned


@pytest.mark.parametrize(("name", "text", "secret"), SHAPES, ids=IDS)
def test_a_secret_never_reaches_a_log_line(name: str, text: str, secret: str) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactingFilter())
    log = logging.getLogger(f"test.redact.{name}")
    log.propagate = False
    log.addHandler(handler)
    try:
        log.warning("saw %s", text, extra={"detail": text})
        try:
            raise RuntimeError(text)
        except RuntimeError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    output = stream.getvalue()
    assert secret not in output
    assert all(json.loads(line) for line in output.splitlines())


@pytest.mark.parametrize(
    "line",
    [
        "session 42 at 12:30 used 1234 tokens",
        '{"input_tokens": 1200, "max_tokens": 4096, "output_tokens": 17}',
        "the token count was 5 and the exact_token_counting flag is on",
        "see https://example.com/docs/a-b-c?page=2 for the steps",
        "call me at 555-1234, room 12B",
        "a SHA like 3f786850e387550fdab836ed7e6dc881de23001b stays",
        "an upper-case SHA 3F786850E387550FDAB836ED7E6DC881DE23001B stays",
        "a longer base64 run aGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQ= stays",
        "the path /usr/lib/python3/dist-packages/setuptools/command stays",
    ],
)
def test_ordinary_text_is_kept(line: str) -> None:
    assert redact(line) == line


def best_of_three(run: Callable[[], object]) -> float:
    """CPU seconds of this thread (the work done, which a busy machine does not stretch)."""
    best = float("inf")
    for _ in range(3):
        started = time.thread_time()
        run()
        best = min(best, time.thread_time() - started)
    return best


@pytest.mark.parametrize(
    "scheme",
    ["redis", "rediss", "amqp", "amqps", "mongodb+srv", "postgresql+psycopg", "mysql", "https", "ftp"],
)
@pytest.mark.parametrize("user", ["", "default", "app.user"])
def test_a_url_password_is_redacted_for_every_scheme_with_or_without_a_user(scheme: str, user: str) -> None:
    text = f"connect with {scheme}://{user}:Zx9-hunter2-secret@host.internal:6379/0 now"
    cleaned = redact(text)
    assert "hunter2" not in cleaned
    assert cleaned == f"connect with {scheme}://{user}:{REDACTED}@host.internal:6379/0 now"


@pytest.mark.parametrize(
    "unit",
    [
        "a_",
        "ab-",
        'token:"',
        "password=",
        "://a:",
        "://:",
        "://:a@",
        "-----BEGIN PRIVATE KEY-----",
        "1" * 12 + ":",
        "eyJ" + "a" * 9 + ".",
    ],
)
def test_redaction_work_grows_linearly_with_adversarial_text(unit: str) -> None:
    small = best_of_three(lambda: redact(unit * 4_000))
    large = best_of_three(lambda: redact(unit * 32_000))
    assert large / small < 20, f"8x the text took {large / small:.0f}x the time (quadratic would be ~64x)"


async def test_a_summary_that_repeats_secrets_is_stored_redacted(
    engine: ContextCompressor, summarizer: ScriptedSummarizer, store: InMemoryStore, session: AgentSession
) -> None:
    leaked = "\n".join(f"- {text}" for _, text, _ in SHAPES)
    summarizer.replies.append(CANNED_SUMMARY + "\n## Key Facts\n" + leaked)
    await persist(store, session.id, conversation(20, words=400))

    result = await compact(engine, store, session, trigger="in_loop")

    assert result.record is not None
    summary = next(m for m in await store.load_active(session.id) if m.kind == "summary")
    for name, _, secret in SHAPES:
        assert secret not in summary.text, name


# ---- redaction runs a rule only where it can match: the same result as every rule everywhere ----------

FRAGMENTS = [
    *(text for _, text, _ in SHAPES),
    *("token", "TOKEN", "Token", "auth_token", "x-api-key", "Api-Key", "X-Auth-Token", "apikey", "API_KEY"),
    *("password", "PassWord", "passwd", "pwd", "passphrase", "secret", "Secret_Key", "private-key"),
    *("accountkey", "session_key", "credentials", "Authorization: token", "Bearer", "basic", "key"),
    *(": ", "=", ":", '"', "'", " ", "\t", "\n", "_", "-", ".", "/", "\\", "://u:", "@", ",", "{", "}"),
    *(
        "abcdefgh",
        "0123456789",
        "AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "…",
        "é",
        "中文",
        "ſ",
        "\u212a",
        "İ",
        "ı",
    ),
]


def redact_everywhere(text: str) -> str:
    """The definition: every rule's pattern applied to the whole text, in order."""
    text = redact_rules._redact_pem(text)
    for pattern, _ in redact_rules._SHAPES:
        text = pattern.sub(REDACTED, text)
    for pattern, _ in redact_rules._GATED:
        text = pattern.sub(REDACTED, text)
    for rule in redact_rules._KEYED:
        text = rule.pattern.sub(rule.replacement, text)
    return redact_rules._URL_PASSWORD.sub(rf"\g<1>{REDACTED}\g<2>", text)


KEYS = [
    *("password", "passwd", "pwd", "passphrase", "secret", "token", "api_key", "api-key", "apikey"),
    *("private_key", "privatekey", "access-key", "secret_key", "account_key", "accountkey", "credential"),
    *("credentials", "auth_token", "authtoken", "session-key", "sessionkey", "bearer", "basic"),
    *("authorization: token", "x-api-key", "x-auth-token"),
]


def case(text: str, upper: list[bool]) -> str:
    return "".join(c.upper() if u else c for c, u in zip(text, upper + [False] * len(text), strict=False))


# "<head><key><separator><value>": where the keyed rules match, in random case, in random places.
ASSIGNMENTS = st.builds(
    lambda head, key, upper, sep, value: head + case(key, upper) + sep + value,
    st.sampled_from(["", "MY_", "a.", "x-", "b", "é", " ", "\n"]),
    st.sampled_from(KEYS),
    st.lists(st.booleans(), max_size=20),
    st.sampled_from([":", "=", '": ', "' = ", ": ", " ", "\t:\t", "\n"]),
    st.sampled_from(['"q w\\"e"', "'x y'", "abcdef123", "ab", "Zm9vYmFy.baz/qux=", '"', ""]),
)


@hsettings(max_examples=800, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), ASSIGNMENTS), max_size=30))
def test_redaction_equals_every_rule_applied_everywhere(parts: list[str]) -> None:
    text = "".join(parts)
    assert redact(text) == redact_everywhere(text)


@pytest.mark.parametrize(
    "text",
    [
        "x = {'token': 'abc123def456'}\nsecret_key=hunter2hunter2 and Secret: 'x y z'",
        "… é  auth_token=0123456789abcdef ſecret=abcdefghij",  # ſ folds to s: the full pass
        '中文 password: \'correct horse\' …\nAPI_KEY="q\\"w e" accountKey=abcdefghijk',
        "x-api-key: 0f1e2d3c4b5a6978 then x-auth-token: zzz and Authorization: Bearer abcdefghij",
    ],
)
def test_redaction_equals_every_rule_applied_everywhere_on_examples(text: str) -> None:
    assert redact(text) == redact_everywhere(text)
    assert redact(text) != text
