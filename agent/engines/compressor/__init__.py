"""The built-in context engine: prune -> boundaries -> summarize -> assemble."""

from agent.engines.compressor.engine import ContextCompressor

__all__ = ["ContextCompressor"]
