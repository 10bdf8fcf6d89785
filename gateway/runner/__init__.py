"""The one builder: wires adapters -> gateway -> agent, and runs the service.

:class:`~gateway.runner.service.Service` builds and owns every part (``service``); the model side
(``models``), the adapters (``adapters``) and the serving parts (``gateway_parts``) are built by
the functions of their own modules; :func:`~gateway.runner.run.run_service` is what
``hygieia run`` calls (``run``). The names below are the package's public surface.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.runner.adapters import build_adapters, chats_on_this_terminal, intake_slots
    from gateway.runner.gateway_parts import (
        build_gateway,
        default_lease,
        default_outbox_lease,
        dialect_of,
        tool_tokens,
    )
    from gateway.runner.models import (
        budget_for,
        build_context_engine,
        build_provider,
        context_window_for,
        model_info_for,
    )
    from gateway.runner.run import OFFLINE_BANNER, run_service, tune_gc
    from gateway.runner.service import Service

# Loaded on first use: `hygieia doctor` and the admin need a model helper, not every adapter and
# the serving stack behind them (each CLI command would pay for importing the whole service).
_HOMES = {
    "OFFLINE_BANNER": "gateway.runner.run",
    "Service": "gateway.runner.service",
    "budget_for": "gateway.runner.models",
    "build_adapters": "gateway.runner.adapters",
    "build_context_engine": "gateway.runner.models",
    "build_gateway": "gateway.runner.gateway_parts",
    "build_provider": "gateway.runner.models",
    "chats_on_this_terminal": "gateway.runner.adapters",
    "context_window_for": "gateway.runner.models",
    "default_lease": "gateway.runner.gateway_parts",
    "default_outbox_lease": "gateway.runner.gateway_parts",
    "dialect_of": "gateway.runner.gateway_parts",
    "intake_slots": "gateway.runner.adapters",
    "model_info_for": "gateway.runner.models",
    "run_service": "gateway.runner.run",
    "tool_tokens": "gateway.runner.gateway_parts",
    "tune_gc": "gateway.runner.run",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


__all__ = [
    "OFFLINE_BANNER",
    "Service",
    "budget_for",
    "build_adapters",
    "build_context_engine",
    "build_gateway",
    "build_provider",
    "chats_on_this_terminal",
    "context_window_for",
    "default_lease",
    "default_outbox_lease",
    "dialect_of",
    "intake_slots",
    "model_info_for",
    "run_service",
    "tool_tokens",
    "tune_gc",
]
