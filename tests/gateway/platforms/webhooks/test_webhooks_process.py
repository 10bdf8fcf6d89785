"""A real ``hygieia run --platform webhooks`` process killed with SIGKILL right after its 202: the
delivery was committed before the answer, so the restarted process serves it."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import httpx

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL, ChatResponder
from tests.gateway.telegram_support import free_port
from tests.gateway.webhooks_support import PUSH, SECRET, SECRET_ENV, github_headers
from tests.process_env import clean_env, sigterm_and_wait

REPO = Path(__file__).resolve().parents[4]
CHAT = 4242
CONFIG = f"""
webhooks:
  routes:
    gh:
      secret_env: {SECRET_ENV}
      deliver_to: telegram:{CHAT}
      template: "{{{{ pusher.name }}}} pushed {{{{ commits.0.message }}}}"
"""


async def spawn(env: dict[str, str], cwd: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli",
        "run",
        "--platform",
        "webhooks",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=cwd,
    )


async def post_when_listening(url: str, body: bytes, proc: asyncio.subprocess.Process) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        for _ in range(600):
            if proc.returncode is not None:
                raise AssertionError("hygieia run exited before listening")
            try:
                return await client.post(url, content=body, headers=github_headers(body, delivery="kill-1"))
            except httpx.ConnectError:
                await asyncio.sleep(0.05)
    raise AssertionError("the listener never came up")


async def test_a_delivery_acknowledged_before_a_kill_9_is_answered_after_the_restart(tmp_path: Path) -> None:
    (tmp_path / "hygieia.yaml").write_text(CONFIG)
    stalled = ChatResponder(chat_delay=60)
    port = free_port()
    body = json.dumps(PUSH).encode()
    async with FakeTelegram() as bot:
        env = clean_env()
        env.update(
            {
                "HYGIEIA_CONFIG": str(tmp_path / "hygieia.yaml"),
                "HYGIEIA_DATA_DIR": str(tmp_path),
                "HYGIEIA_MODEL": MODEL,
                "HYGIEIA_API__PORT": str(port),
                "HYGIEIA_CLUSTER__SESSION_LEASE_SECONDS": "2",
                "HYGIEIA_TELEGRAM_BASE_URL": bot.root,
                "HYGIEIA_TELEGRAM__POLL_TIMEOUT": "1",
                "TELEGRAM_BOT_TOKEN": bot.token,
                "ANTHROPIC_API_KEY": "test",
                SECRET_ENV: SECRET,
                "PYTHONPATH": str(REPO),
            }
        )
        async with FakeAnthropic(responder=stalled) as model_api:
            env["ANTHROPIC_BASE_URL"] = model_api.base_url
            proc = await spawn(env, tmp_path)
            try:
                response = await post_when_listening(f"http://127.0.0.1:{port}/hooks/gh", body, proc)
                proc.send_signal(signal.SIGKILL)  # right after the 2xx: nothing after it ran for sure
                await proc.wait()
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
        assert response.status_code == 202, response.text
        assert proc.returncode == -signal.SIGKILL
        assert bot.sent == []

        answering = ChatResponder()
        async with FakeAnthropic(responder=answering) as model_api:
            env["ANTHROPIC_BASE_URL"] = model_api.base_url
            proc = await spawn(env, tmp_path)
            try:
                [sent] = await bot.wait_for_sent(1, timeout=40)
                stderr = await sigterm_and_wait(proc)
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()

    assert proc.returncode == 0, stderr
    assert (sent.chat_id, sent.plain_text) == (CHAT, "reply: mona pushed Fix the flux capacitor")
    assert len(answering.chat_bodies) == 1
