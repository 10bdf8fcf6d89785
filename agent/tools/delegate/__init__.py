"""``delegate``: hand a self-contained task to a sub-agent with a fresh context."""

from agent.tools.delegate.tool import DELEGATE, DelegateTool, DelegationLimits, SubAgentParts

__all__ = ["DELEGATE", "DelegateTool", "DelegationLimits", "SubAgentParts"]
