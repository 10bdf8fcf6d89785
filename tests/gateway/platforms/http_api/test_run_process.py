"""``hygieia run`` with the API, as an operator starts it: a child process on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest
from openai import AsyncOpenAI

from tests.fakes.anthropic import FakeAnthropic
from tests.gateway.conftest import ChatResponder
from tests.gateway.platforms.http_api.api_support import ALICE_KEY, KEYS
from tests.process_env import clean_env, sigterm_and_wait


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _until_listening(base_url: str, proc: asyncio.subprocess.Process, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(timeout=2) as http:
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                return
            try:
                await http.get(f"{base_url}/models")
                return
            except httpx.TransportError:
                await asyncio.sleep(0.2)
    raise AssertionError("the API did not start listening")


@pytest.mark.parametrize("args", [["--platform", "api"], []], ids=["platform_flag", "keys_alone"])
async def test_hygieia_run_serves_the_api_and_stops_cleanly(tmp_path: Path, args: list[str]) -> None:
    port = _free_port()
    async with FakeAnthropic(responder=ChatResponder()) as fake:
        env = clean_env() | {
            "HYGIEIA_DATA_DIR": str(tmp_path),
            "HYGIEIA_API_KEYS": KEYS,
            "HYGIEIA_API__PORT": str(port),
            "ANTHROPIC_API_KEY": "test",
            "ANTHROPIC_BASE_URL": fake.base_url,
            "HYGIEIA_MODEL": "claude-sonnet-4-6",
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway.cli",
            "run",
            *args,
            stdin=asyncio.subprocess.DEVNULL,  # a console would read this, find its end and exit
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=tmp_path,
        )
        try:
            base_url = f"http://127.0.0.1:{port}/v1"
            await _until_listening(base_url, proc)
            async with AsyncOpenAI(api_key=ALICE_KEY, base_url=base_url, max_retries=0) as client:
                answer = await client.chat.completions.create(
                    model="hygieia", messages=[{"role": "user", "content": "hello from a script"}]
                )
            assert answer.choices[0].message.content == "reply: hello from a script"
            await sigterm_and_wait(proc)
            assert proc.returncode == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
