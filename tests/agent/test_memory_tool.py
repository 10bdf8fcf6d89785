"""The memory tool: its six commands, scope isolation, and refusing every path outside /memories."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.errors import ToolError
from agent.tools import ToolContext, ToolOutput, default_registry
from agent.tools.memory_paths import normalize_memory_path
from tests.agent.loop_support import make_session
from tests.fakes.memory_store import InMemoryStore


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


async def memory(store: InMemoryStore, scope: str = "chat-a", **tool_input: Any) -> ToolOutput:
    ctx = ToolContext(make_session(), store, scope)
    return await default_registry().dispatch(ctx, "memory", tool_input)


async def ok(store: InMemoryStore, **tool_input: Any) -> str:
    out = await memory(store, **tool_input)
    assert not out.is_error, out.text
    return out.text


async def content(store: InMemoryStore, path: str, scope: str = "chat-a") -> str | None:
    entry = await store.memory_get(scope, path)
    return None if entry is None else entry.content


async def test_create_then_view_shows_numbered_lines(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/notes.md", file_text="alpha\nbeta\n")
    text = await ok(store, command="view", path="/memories/notes.md")
    assert text == "Here's the content of /memories/notes.md with line numbers:\n     1\talpha\n     2\tbeta"


async def test_view_range_shows_only_those_lines(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/n.md", file_text="a\nb\nc\nd\n")
    text = await ok(store, command="view", path="/memories/n.md", view_range=[2, 3])
    assert text.splitlines()[1:] == ["     2\tb", "     3\tc"]
    tail = await ok(store, command="view", path="/memories/n.md", view_range=[3, -1])
    assert tail.splitlines()[1:] == ["     3\tc", "     4\td"]


async def test_view_of_a_directory_lists_files(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="x")
    await ok(store, command="create", path="/memories/projects/b.md", file_text="yy")
    text = await ok(store, command="view", path="/memories")
    assert "/memories/a.md" in text and "/memories/projects/" in text and "/memories/projects/b.md" in text


async def test_view_of_an_empty_memory_root_is_not_an_error(store: InMemoryStore) -> None:
    text = await ok(store, command="view", path="/memories")
    assert "0 files" in text


async def test_create_refuses_to_overwrite(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="first")
    out = await memory(store, command="create", path="/memories/a.md", file_text="second")
    assert out.is_error and "already exists" in out.text
    assert await content(store, "/memories/a.md") == "first"


async def test_str_replace_replaces_a_unique_string(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="likes tea\nlives in Oslo\n")
    await ok(store, command="str_replace", path="/memories/a.md", old_str="tea", new_str="coffee")
    assert await content(store, "/memories/a.md") == "likes coffee\nlives in Oslo\n"


async def test_str_replace_refuses_an_ambiguous_string(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="tea\ntea\n")
    out = await memory(store, command="str_replace", path="/memories/a.md", old_str="tea", new_str="x")
    assert out.is_error and "lines: 1, 2" in out.text
    assert await content(store, "/memories/a.md") == "tea\ntea\n"


async def test_str_replace_of_a_missing_string_is_an_error(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="tea\n")
    out = await memory(store, command="str_replace", path="/memories/a.md", old_str="milk", new_str="x")
    assert out.is_error and "did not appear verbatim" in out.text


async def test_insert_puts_text_at_the_line(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="one\nthree\n")
    await ok(store, command="insert", path="/memories/a.md", insert_line=1, insert_text="two")
    await ok(store, command="insert", path="/memories/a.md", insert_line=0, insert_text="zero")
    assert await content(store, "/memories/a.md") == "zero\none\ntwo\nthree\n"


async def test_insert_out_of_range_is_an_error(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="one\n")
    out = await memory(store, command="insert", path="/memories/a.md", insert_line=5, insert_text="x")
    assert out.is_error and "[0, 1]" in out.text


async def test_delete_removes_a_file_and_a_directory(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="x")
    await ok(store, command="create", path="/memories/d/b.md", file_text="y")
    await ok(store, command="create", path="/memories/d/c.md", file_text="z")
    await ok(store, command="delete", path="/memories/a.md")
    await ok(store, command="delete", path="/memories/d")
    assert await store.memory_list("chat-a") == []


async def test_delete_of_the_root_is_refused(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="x")
    out = await memory(store, command="delete", path="/memories")
    assert out.is_error and await content(store, "/memories/a.md") == "x"


async def test_rename_moves_a_file(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="x")
    await ok(store, command="rename", path="/memories/a.md", new_path="/memories/archive/a.md")
    assert await content(store, "/memories/a.md") is None
    assert await content(store, "/memories/archive/a.md") == "x"


async def test_rename_accepts_old_path_as_the_sdk_spells_it(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="x")
    await ok(store, command="rename", path="", old_path="/memories/a.md", new_path="/memories/b.md")
    assert await content(store, "/memories/b.md") == "x"


async def test_rename_onto_an_existing_file_is_refused(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="x")
    await ok(store, command="create", path="/memories/b.md", file_text="y")
    out = await memory(store, command="rename", path="/memories/a.md", new_path="/memories/b.md")
    assert out.is_error and await content(store, "/memories/b.md") == "y"


async def test_memory_is_scoped_per_chat(store: InMemoryStore) -> None:
    await ok(store, command="create", path="/memories/secret.md", file_text="mine")
    out = await memory(store, scope="chat-b", command="view", path="/memories/secret.md")
    assert out.is_error and "does not exist" in out.text


TRAVERSALS = [
    "../secrets",
    "/memories/../etc/passwd",
    "/memories/notes/../../etc/passwd",
    "/etc/passwd",
    "/",
    "/memoriesX/a.md",
    "memories/a.md",
    "/memories/%2e%2e/%2e%2e/etc/passwd",
    "/memories/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/memories/%252e%252e%252fetc",
    "/memories/%25252e%25252e%25252fetc",
    "%2fetc%2fpasswd",
    "/memories\\..\\etc",
    "/memories/%5c..%5cetc",
    "/memories/a\x00.md",
    "/memories/a%00.md",
    "/memories/\uff0e\uff0e/etc",
    "/memories/\u2025/etc",
    "//memories/../etc",
    "/memories/a\nb",
]


@pytest.mark.parametrize("path", TRAVERSALS)
async def test_paths_outside_memories_are_refused(store: InMemoryStore, path: str) -> None:
    out = await memory(store, command="create", path=path, file_text="pwned")
    assert out.is_error and "refused" in out.text
    assert await store.memory_list("chat-a", "/") == []


@pytest.mark.parametrize("path", TRAVERSALS)
async def test_rename_to_a_path_outside_memories_is_refused(store: InMemoryStore, path: str) -> None:
    await ok(store, command="create", path="/memories/a.md", file_text="x")
    out = await memory(store, command="rename", path="/memories/a.md", new_path=path)
    assert out.is_error and await content(store, "/memories/a.md") == "x"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/memories", "/memories"),
        ("/memories/", "/memories"),
        ("/memories/./a//b.md", "/memories/a/b.md"),
        ("/memories/%C3%A9t%C3%A9.md", "/memories/été.md"),
        ("/memories/100%.md", "/memories/100%.md"),
    ],
)
def test_harmless_paths_are_normalized(raw: str, expected: str) -> None:
    assert normalize_memory_path(raw) == expected


@given(st.text(alphabet=st.sampled_from(list("/.%25ef2cm\\\x00abmemories")), max_size=40))
def test_no_accepted_path_leaves_memories(raw: str) -> None:
    try:
        path = normalize_memory_path(raw)
    except ToolError:
        return
    assert path == "/memories" or path.startswith("/memories/")
    assert ".." not in path.split("/") and "\\" not in path and "\x00" not in path
