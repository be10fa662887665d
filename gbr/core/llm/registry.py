"""Find a provider by name, or pick the first one configured, and build it from its settings.

Every provider takes the same path in: `register(name, factory, aliases)`. A factory is a
provider class that declares where its settings come from (`key_env`, `base_url_env`,
`model_env`, defaults); `resolve_settings` reads them all the same way, so adding a provider is
one class and one `register` call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from gbr.core.errors import ConfigError, MissingKeyError
from gbr.core.llm.base import LlmProvider, ProviderSettings
from gbr.core.llm.config import config_path, provider_table, read_config
from gbr.core.llm.gemini import GeminiProvider
from gbr.core.llm.groq import GroqProvider
from gbr.core.llm.openai_compat import OpenAICompatProvider

DEFAULT_TIMEOUT = 30.0
DEFAULT_DEADLINE = 60.0
DEFAULT_MAX_RETRIES = 4


class ProviderFactory(Protocol):
    """A provider class: where its settings come from, and how to build it from them."""

    # Read-only: each provider class sets them as plain class attributes.
    @property
    def key_env(self) -> str | None: ...
    @property
    def base_url_env(self) -> str | None: ...
    @property
    def model_env(self) -> str | None: ...
    @property
    def default_base_url(self) -> str: ...
    @property
    def default_model(self) -> str: ...
    @property
    def key_required(self) -> bool: ...
    @property
    def description(self) -> str: ...
    @property
    def wire_format(self) -> str: ...

    def __call__(self, settings: ProviderSettings) -> LlmProvider: ...


def _norm(name: str) -> str:
    return name.strip().lower()


def _env_value(env: Mapping[str, str], var: str | None) -> str | None:
    # An empty or blank variable counts as unset: `GROQ_API_KEY= gleambrctl ask` means "none".
    value = env.get(var, "").strip() if var else ""
    return value or None


class ProviderRegistry:
    def __init__(self) -> None:
        self._factories: dict[str, ProviderFactory] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str, factory: ProviderFactory, aliases: Iterable[str] = ()) -> None:
        """Add (or replace) a provider; registration order is the auto-pick order."""
        name = _norm(name)
        self._factories[name] = factory
        for alias in aliases:
            self._aliases[_norm(alias)] = name

    def available(self) -> list[str]:
        return list(self._factories)

    def env_vars(self) -> list[str]:
        """Every variable that configures a registered provider: what to scrub for a clean
        environment (tests, benchmarks, a daemon started without keys)."""
        names = (
            var
            for factory in self._factories.values()
            for var in (factory.key_env, factory.base_url_env, factory.model_env)
        )
        return list(dict.fromkeys(var for var in names if var))

    def canonical(self, name: str) -> str:
        key = _norm(name)
        key = self._aliases.get(key, key)
        if key not in self._factories:
            known = ", ".join(self.available())
            aliases = ", ".join(sorted(self._aliases))
            raise ConfigError(
                f"unknown LLM provider {name!r}; choose one of: {known} (aliases: {aliases})"
            )
        return key

    def resolve_settings(
        self,
        name: str,
        *,
        model: str | None = None,
        env: Mapping[str, str],
        timeout: float | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> ProviderSettings:
        """Each setting from the arguments, else the environment, else the file (`config`
        when already read), else defaults."""
        name = self.canonical(name)
        factory = self._factories[name]
        table = provider_table(env, name, config)
        api_key = _env_value(env, factory.key_env) or _blank_to_none(table.get("api_key"))
        if factory.key_required and not api_key:
            raise MissingKeyError(
                f"{name} needs an API key; set {factory.key_env} "
                f"(or api_key under [{name}] in {config_path(env) or '$GBR_HOME/config.toml'})",
                provider=name,
            )
        timeout = timeout if timeout is not None else table.get("timeout", DEFAULT_TIMEOUT)
        if timeout <= 0:
            raise ConfigError(f"the {name} timeout must be more than 0 seconds, not {timeout}")
        # A longer timeout needs a longer deadline, or there would be no room for one retry.
        deadline = table.get("deadline", max(DEFAULT_DEADLINE, 2 * timeout))
        return ProviderSettings(
            name=name,
            base_url=_env_value(env, factory.base_url_env)
            or table.get("base_url")
            or factory.default_base_url,
            model=model
            or _env_value(env, factory.model_env)
            or table.get("model")
            or factory.default_model,
            timeout=float(timeout),
            deadline=float(deadline),
            max_retries=table.get("max_retries", DEFAULT_MAX_RETRIES),
            api_key=api_key,
        )

    def configured(
        self, env: Mapping[str, str], config: Mapping[str, Any] | None = None
    ) -> list[str]:
        """Providers ready to use, in auto-pick order.

        One that needs a key is ready when it has one; one that does not (a local server) is
        ready only when its base URL was set, since nothing says a server runs at the default.
        """
        config = read_config(env) if config is None else config
        ready = []
        for name, factory in self._factories.items():
            table = provider_table(env, name, config)
            if factory.key_required:
                found = _env_value(env, factory.key_env) or _blank_to_none(table.get("api_key"))
            else:
                found = _env_value(env, factory.base_url_env) or table.get("base_url")
            if found:
                ready.append(name)
        return ready

    def get_provider(
        self,
        name: str | None = None,
        *,
        model: str | None = None,
        env: Mapping[str, str],
        timeout: float | None = None,
    ) -> LlmProvider:
        """The named provider, or the first configured one; MissingKeyError if there is none."""
        config = None  # read once, here for the pick or in resolve_settings
        if name is None:
            config = read_config(env)
            ready = self.configured(env, config)
            if not ready:
                raise MissingKeyError(self._nothing_configured())
            name = ready[0]
        name = self.canonical(name)
        settings = self.resolve_settings(name, model=model, env=env, timeout=timeout, config=config)
        return self._factories[name](settings)

    def _nothing_configured(self) -> str:
        keys = [f.key_env for f in self._factories.values() if f.key_required and f.key_env]
        urls = [
            f"{f.base_url_env} for {f.description or 'a local ' + f.wire_format + ' server'}"
            for f in self._factories.values()
            if not f.key_required and f.base_url_env
        ]
        fixes = " or ".join(keys)
        if urls:
            fixes = f"{fixes}, or {' or '.join(urls)}" if fixes else " or ".join(urls)
        return f"no LLM provider is configured; set {fixes}"


def _blank_to_none(value: Any) -> str | None:
    return (value.strip() or None) if isinstance(value, str) else None


_registry = ProviderRegistry()
_registry.register("groq", GroqProvider)
_registry.register("gemini", GeminiProvider)
_registry.register(
    "openai", OpenAICompatProvider, aliases=("openai-compatible", "ollama", "llama.cpp")
)

register = _registry.register
available = _registry.available
provider_env_vars = _registry.env_vars
resolve_settings = _registry.resolve_settings
get_provider = _registry.get_provider


def is_configured(env: Mapping[str, str], *, name: str | None = None) -> bool:
    """Whether any provider (or the named one) is ready: it has its key, or its server's URL."""
    ready = _registry.configured(env)
    return bool(ready) if name is None else _registry.canonical(name) in ready
