"""``hygieia doctor`` connects to every configured MCP server and lists its tools, or says why not."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gateway.cli.doctor import run_checks
from gateway.config import load_settings
from tests.fakes.mcp_tools import ROOT, free_port


async def test_the_doctor_lists_each_servers_tools_and_names_a_down_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    args = json.dumps(["-m", "tests.fakes.mcp_tools", "stdio"])
    config = tmp_path / "hygieia.yaml"
    config.write_text(
        f"mcp_servers:\n  fake:\n    command: {sys.executable}\n    args: {args}\n    cwd: {ROOT}\n"
        f"  gone:\n    url: http://127.0.0.1:{free_port()}/mcp\n    connect_timeout_seconds: 2\n"
    )
    monkeypatch.setenv("HYGIEIA_CONFIG", str(config))
    monkeypatch.setenv("HYGIEIA_DATA_DIR", str(tmp_path))
    checks = {c.name: c for c in await run_checks(load_settings(), contact_endpoints=True)}
    assert checks["mcp fake"].status == "ok"
    assert "mcp_fake_echo" in checks["mcp fake"].detail
    assert checks["mcp gone"].status == "fail"
    assert checks["mcp gone"].detail.startswith("down since")
