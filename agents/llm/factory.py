"""Choosing the provider an agent's ``model_config_json`` asks for."""

from __future__ import annotations

from typing import Any

from agents.llm.base import LLMConfigError, LLMProvider
from agents.llm.scripted import ScriptedProvider, check_script

PROVIDERS = ("scripted", "openai")


def check_model_config(config: Any) -> None:
    """Raise :class:`LLMConfigError` unless the provider part of ``config`` is usable."""
    if not isinstance(config, dict):
        raise LLMConfigError("model_config_json must be an object")
    provider = config.get("provider", "scripted")
    if provider not in PROVIDERS:
        raise LLMConfigError(f"unknown provider {provider!r} (known: {', '.join(PROVIDERS)})")
    if provider == "scripted":
        check_script(config.get("script"))
    elif not isinstance(config.get("model"), str) or not config["model"]:
        raise LLMConfigError('the openai provider needs "model"')
    if not isinstance(config.get("params", {}), dict):
        raise LLMConfigError("params must be an object")


def check_credentials(config: Any) -> None:
    """Raise :class:`LLMConfigError` unless the credentials in ``config`` (the model config with the
    agent's secret ``api_key`` merged in, as ``Agent.provider_config()`` builds it) may be used:
    an openai agent with its own ``base_url`` must bring its own key."""
    if isinstance(config, dict) and config.get("provider", "scripted") == "openai":
        # Imported when an openai agent is checked: the openai SDK is heavy to load, and a
        # deployment of scripted agents only never needs it.
        from agents.llm.openai_compat import check_credentials as check_openai_credentials

        check_openai_credentials(config)


def provider_for(config: dict[str, Any]) -> LLMProvider:
    check_model_config(config)
    if config.get("provider", "scripted") == "scripted":
        return ScriptedProvider(config["script"])
    from agents.llm.openai_compat import OpenAICompatibleProvider  # the openai SDK: loaded on first use

    return OpenAICompatibleProvider.from_config(config)
