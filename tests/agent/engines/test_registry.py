"""Which engine runs: the default, a plugin through a real entry point, an unknown name."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agent.engines.compressor.pipeline import CostOrderedCompressor
from agent.engines.failopen import FailOpen
from agent.engines.registry import (
    EngineDeps,
    PerSession,
    UnknownEngine,
    build_engine,
    check_engine_name,
    installed_engines,
)
from agent.engines.sliding import SlidingEngine
from agent.settings import CompressionSettings, ContextSettings
from agent.types import AgentSession, ContextState
from tests.agent.conftest import ScriptedSummarizer

PLUGIN = """
from agent.engines.sliding import SlidingEngine

BUILT = []


class TinyEngine(SlidingEngine):
    name = "tiny"
    shares_state = False


def make(deps):
    engine = TinyEngine(deps.compression)
    BUILT.append(engine)
    return engine
"""


def install_plugin(
    root: Path, monkeypatch: pytest.MonkeyPatch, *, module: str = "tiny_engine_plugin"
) -> None:
    """A tiny distribution on sys.path whose entry point registers the engine ``tiny``."""
    (root / f"{module}.py").write_text(PLUGIN)
    info = root / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(f"""
        [hygieia.context_engines]
        tiny = {module}:make
        """)
    )
    monkeypatch.syspath_prepend(str(root))


def deps() -> EngineDeps:
    return EngineDeps(CompressionSettings(), ScriptedSummarizer(), summary_model="claude-haiku-4-5")


def test_the_default_engine_is_the_cost_ordered_compressor() -> None:
    engine = build_engine(ContextSettings(), deps())
    assert isinstance(engine, CostOrderedCompressor)
    assert engine.name == "compressor"
    assert [s.name for s in engine.strategies] == ["snip", "prune", "summary", "reactive"]


def test_sliding_is_named_in_one_line_and_guarded_by_the_built_in() -> None:
    engine = build_engine(ContextSettings(engine="sliding"), deps())
    assert isinstance(engine, FailOpen)
    assert isinstance(engine.primary, SlidingEngine)
    assert isinstance(engine.fallback, CostOrderedCompressor)


def test_a_plugin_is_selected_through_its_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_plugin(tmp_path, monkeypatch)
    assert "tiny" in installed_engines()
    engine = build_engine(ContextSettings(engine="tiny"), deps())
    assert isinstance(engine, FailOpen)
    assert engine.name == "tiny"
    assert isinstance(engine.primary, PerSession)


def test_a_plugin_is_never_loaded_unless_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_plugin(tmp_path, monkeypatch, module="unloaded_engine_plugin")
    import sys

    build_engine(ContextSettings(), deps())
    assert "unloaded_engine_plugin" not in sys.modules


def test_a_plugin_with_state_gets_one_instance_per_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_plugin(tmp_path, monkeypatch, module="stateful_engine_plugin")
    engine = build_engine(ContextSettings(engine="tiny"), deps())
    assert isinstance(engine, FailOpen) and isinstance(engine.primary, PerSession)
    routed = engine.primary
    a = AgentSession(id="a", system_prompt="", model="m", context_window=10_000)
    b = AgentSession(id="b", system_prompt="", model="m", context_window=10_000)
    engine.should_compress(a, ContextState(), 10)
    engine.should_compress(b, ContextState(), 10)
    engine.should_compress(a, ContextState(), 10)
    assert routed.for_session("a") is not routed.for_session("b")
    assert routed.for_session("a") is routed.for_session("a")
    import stateful_engine_plugin  # type: ignore[import-not-found]

    assert len(stateful_engine_plugin.BUILT) == 2


def test_an_unknown_engine_fails_with_one_line_listing_the_installed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_plugin(tmp_path, monkeypatch, module="listed_engine_plugin")
    with pytest.raises(UnknownEngine) as caught:
        check_engine_name("lossless")
    message = str(caught.value)
    assert "\n" not in message
    assert message == (
        "unknown context engine 'lossless' (context.engine); installed engines: compressor, sliding, tiny"
    )
    with pytest.raises(UnknownEngine):
        build_engine(ContextSettings(engine="lossless"), deps())
