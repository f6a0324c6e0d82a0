"""Model providers behind one small interface (SPEC L1-L3).

`get_provider()` picks, once per process: the configured OpenAI-compatible endpoint;
else a local Ollama if one answers at start-up; else offline mode.
"""

from previously.llm.base import Completion, Provider, ProviderError, ToolCall
from previously.llm.select import get_provider, reset_provider

__all__ = ["Completion", "Provider", "ProviderError", "ToolCall", "get_provider", "reset_provider"]
