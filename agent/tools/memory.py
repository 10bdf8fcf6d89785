"""``memory``: the Anthropic memory-tool command set over durable notes under ``/memories``.

Files live in the store (``memory_*`` methods) under the caller's memory scope;
directories exist implicitly, as the parents of files. Messages follow the wording of
the Anthropic SDK's reference implementation, which the models are trained on.
"""

from __future__ import annotations

from agent.errors import ToolError
from agent.tools.base import JSONObject, ResumePoint, Tool, ToolContext, ToolOutput
from agent.tools.memory_paths import ROOT, normalize_memory_path
from agent.types import MemoryEntry

COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
MAX_FILE_CHARS = 200_000
LINE_NUMBER_WIDTH = 6


def _size(text: str) -> str:
    size = float(len(text.encode("utf-8")))
    for unit in ("B", "K", "M"):
        if size < 1024 or unit == "M":
            return f"{int(size)}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _lines(content: str) -> list[str]:
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _numbered(lines: list[str], first: int) -> list[str]:
    return [f"{str(first + i).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines)]


def _required(tool_input: JSONObject, key: str, command: str) -> str:
    value = tool_input.get(key)
    if not isinstance(value, str):
        raise ToolError(f"memory {command} needs {key!r} (a string)")
    return value


MEMORY_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "enum": list(COMMANDS)},
        "path": {"type": "string", "description": "A path under /memories."},
        "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
        "file_text": {"type": "string"},
        "old_str": {"type": "string"},
        "new_str": {"type": "string"},
        "insert_line": {"type": "integer", "minimum": 0},
        "insert_text": {"type": "string"},
        "old_path": {"type": "string"},
        "new_path": {"type": "string"},
    },
    "required": ["command", "path"],
}


class MemoryTool(Tool):
    name = "memory"
    description = (
        "Durable notes that outlive this conversation's context, as files under /memories. Commands: "
        "view (a directory listing, or a file with line numbers; optional view_range [start, end], "
        "end -1 = last line), create (path, file_text), str_replace (path, old_str that appears exactly "
        "once, new_str), insert (path, insert_line: 0 = before the first line, insert_text), "
        "delete (path), rename (path or old_path, new_path). Check /memories before starting a task; "
        "keep notes short and current."
    )
    input_schema = MEMORY_SCHEMA

    async def run(self, ctx: ToolContext, tool_input: JSONObject) -> ToolOutput:
        command = tool_input["command"]
        if command == "rename":
            return ToolOutput(await self._rename(ctx, tool_input))
        path = normalize_memory_path(tool_input["path"])
        if command == "view":
            return await self._view(ctx, path, tool_input.get("view_range"))
        if command == "create":
            return ToolOutput(await self._create(ctx, path, _required(tool_input, "file_text", command)))
        if command == "str_replace":
            old = _required(tool_input, "old_str", command)
            return ToolOutput(await self._str_replace(ctx, path, old, str(tool_input.get("new_str", ""))))
        if command == "insert":
            if "insert_line" not in tool_input:
                raise ToolError("memory insert needs 'insert_line' (an integer, 0 = before the first line)")
            text = _required(tool_input, "insert_text", command)
            return ToolOutput(await self._insert(ctx, path, int(tool_input["insert_line"]), text))
        return ToolOutput(await self._delete(ctx, path))

    # -- helpers over the store -------------------------------------------------------------

    async def _file(self, ctx: ToolContext, path: str) -> MemoryEntry:
        entry = await ctx.store.memory_get(ctx.memory_scope, path) if path != ROOT else None
        if entry is None:
            if await self._children(ctx, path):
                raise ToolError(f"The path {path} is a directory, not a file.")
            raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
        return entry

    async def _children(self, ctx: ToolContext, path: str) -> list[MemoryEntry]:
        entries = await ctx.store.memory_list(ctx.memory_scope, path)
        return [e for e in entries if e.path.startswith(path.rstrip("/") + "/")]

    async def _exists(self, ctx: ToolContext, path: str) -> bool:
        if path == ROOT or await ctx.store.memory_get(ctx.memory_scope, path) is not None:
            return True
        return bool(await self._children(ctx, path))

    async def _write(self, ctx: ToolContext, path: str, content: str) -> None:
        if len(content) > MAX_FILE_CHARS:
            raise ToolError(f"a memory file holds at most {MAX_FILE_CHARS} characters; split it or trim it")
        await ctx.store.memory_put(ctx.memory_scope, path, content)

    # -- commands ---------------------------------------------------------------------------

    async def _view(self, ctx: ToolContext, path: str, view_range: list[int] | None) -> ToolOutput:
        entry = await ctx.store.memory_get(ctx.memory_scope, path) if path != ROOT else None
        if entry is None:
            return ToolOutput(await self._listing(ctx, path))
        lines = _lines(entry.content)
        start, end = 1, len(lines)
        if view_range is not None:
            start, end = view_range
            end = len(lines) if end == -1 else end
            if start < 1 or start > max(len(lines), 1) or end < start or end > len(lines):
                raise ToolError(
                    f"Invalid view_range {view_range}: the file has {len(lines)} lines; "
                    "use [start, end] with 1 <= start <= end, or end -1 for the last line."
                )
        header = f"Here's the content of {path} with line numbers:"
        numbered = _numbered(lines[start - 1 : end], start)
        points: list[ResumePoint] = []
        length = len(header) + 1
        for offset, line in enumerate(numbered):
            points.append(
                ResumePoint(length, {"command": "view", "path": path, "view_range": [start + offset, -1]})
            )
            length += len(line) + 1
        return ToolOutput("\n".join([header, *numbered]), resume_points=tuple(points))

    async def _listing(self, ctx: ToolContext, path: str) -> str:
        children = await self._children(ctx, path)
        if not children and path != ROOT:
            raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
        base = path.rstrip("/")
        files: dict[str, str] = {}
        dirs: dict[str, int] = {}
        for entry in children:
            parts = entry.path[len(base) + 1 :].split("/")
            if len(parts) <= 2:
                files["/".join(parts)] = _size(entry.content)
            for depth in range(1, min(len(parts), 3)):
                if depth < len(parts):
                    key = "/".join(parts[:depth]) + "/"
                    dirs[key] = dirs.get(key, 0) + 1
        rows = [(name, size) for name, size in files.items()]
        rows += [(name, f"{count} file{'s' if count != 1 else ''}") for name, count in dirs.items()]
        lines = [f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:"]
        lines.append(f"{len(children)} files\t{path}")
        lines.extend(f"{size}\t{base}/{name}" for name, size in sorted(rows))
        return "\n".join(lines)

    async def _create(self, ctx: ToolContext, path: str, text: str) -> str:
        if path == ROOT:
            raise ToolError(f"{ROOT} is the memory directory; create a file inside it")
        if await self._exists(ctx, path):
            raise ToolError(
                f"File {path} already exists; edit it with str_replace or insert, or delete it first"
            )
        await self._write(ctx, path, text)
        return f"File created successfully at: {path}"

    async def _str_replace(self, ctx: ToolContext, path: str, old: str, new: str) -> str:
        if not old:
            raise ToolError("old_str is empty: give the exact text to replace")
        content = (await self._file(ctx, path)).content
        count = content.count(old)
        if count == 0:
            raise ToolError(
                f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
            )
        if count > 1:
            lines, start = [], 0
            while (pos := content.find(old, start)) != -1:
                lines.append(content[:pos].count("\n") + 1)
                start = pos + 1
            raise ToolError(
                f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines: "
                f"{', '.join(map(str, lines))}. Please ensure it is unique"
            )
        changed = content[: content.find(old)].count("\n")
        updated = content.replace(old, new, 1)
        await self._write(ctx, path, updated)
        all_lines = updated.split("\n")
        first = max(0, changed - 2)
        snippet = _numbered(all_lines[first : changed + 3 + new.count("\n")], first + 1)
        return (
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
            + ("\n".join(snippet))
        )

    async def _insert(self, ctx: ToolContext, path: str, line: int, text: str) -> str:
        lines = _lines((await self._file(ctx, path)).content)
        if line < 0 or line > len(lines):
            raise ToolError(
                f"Invalid `insert_line` parameter: {line}. It should be within the range [0, {len(lines)}]."
            )
        lines.insert(line, text.rstrip("\n"))
        await self._write(ctx, path, "\n".join(lines) + "\n")
        return f"The file {path} has been edited."

    async def _delete(self, ctx: ToolContext, path: str) -> str:
        if path == ROOT:
            raise ToolError(f"Cannot delete the {ROOT} directory itself")
        if await ctx.store.memory_delete(ctx.memory_scope, path) == 0:
            raise ToolError(f"The path {path} does not exist")
        return f"Successfully deleted {path}"

    async def _rename(self, ctx: ToolContext, tool_input: JSONObject) -> str:
        old = normalize_memory_path(str(tool_input.get("old_path") or tool_input["path"]))
        new = normalize_memory_path(_required(tool_input, "new_path", "rename"))
        if ROOT in (old, new):
            raise ToolError(f"Cannot rename the {ROOT} directory itself")
        if new == old or new.startswith(old + "/"):
            raise ToolError(f"Cannot move {old} into itself")
        if await self._exists(ctx, new):
            raise ToolError(f"The destination {new} already exists")
        if await ctx.store.memory_rename(ctx.memory_scope, old, new) == 0:
            raise ToolError(f"The path {old} does not exist")
        return f"Successfully renamed {old} to {new}"
