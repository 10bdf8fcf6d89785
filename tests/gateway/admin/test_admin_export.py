"""Exports from the admin API and page."""

from __future__ import annotations

import json

import pytest

from gateway.store.repository import Store
from tests.gateway.admin_support import admin_client, seed


async def test_the_api_exports_jsonl_and_markdown_as_downloads(store: Store) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        jsonl = await client.get(f"/api/sessions/{seeded.session_id}/export", params={"format": "jsonl"})
        md = await client.get(f"/sessions/{seeded.session_id}/export", params={"format": "md"})
        page = (await client.get(f"/sessions/{seeded.session_id}")).text
    lines = [json.loads(line) for line in jsonl.text.splitlines()]
    assert [line["type"] for line in lines[:3]] == ["session", "compaction", "compaction"]
    assert sum(1 for line in lines if line["type"] == "message") == 12  # every row, archived ones too
    assert any(not line["active"] for line in lines if line["type"] == "message")
    assert jsonl.headers["content-disposition"] == f'attachment; filename="hygieia-{seeded.session_id}.jsonl"'
    assert md.headers["content-type"].startswith("text/markdown") and "## Compaction 2" in md.text
    assert f'href="/sessions/{seeded.session_id}/export?format=md"' in page


@pytest.mark.parametrize("path", ["/api/sessions/{sid}/export", "/sessions/{sid}/export"])
@pytest.mark.parametrize("fmt", ["jsonl", "md"])
async def test_an_export_download_is_never_sniffed_as_another_type(store: Store, path: str, fmt: str) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        answer = await client.get(path.format(sid=seeded.session_id), params={"format": fmt})
    assert answer.status_code == 200
    assert answer.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(("query", "status"), [("format=pdf", 400), ("format=", 400)])
async def test_a_bad_export_format_is_400(store: Store, query: str, status: int) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        response = await client.get(f"/api/sessions/{seeded.session_id}/export?{query}")
    assert response.status_code == status and "format" in response.json()["error"]


async def test_exporting_an_unknown_session_is_404(store: Store) -> None:
    async with admin_client(store) as client:
        assert (await client.get(f"/api/sessions/{'c' * 32}/export")).status_code == 404
