"""Known models and providers: built-in ones, pi's models.json, and models a user's settings add."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from pi_lsp.providers.pi16_models import MODELS

ANTHROPIC_API = "anthropic-messages"
CHAT_API = "openai-completions"
RESPONSES_API = "openai-responses"
SUPPORTED_APIS = (ANTHROPIC_API, CHAT_API, RESPONSES_API)
# Where pi (and pi-lsp) read the built-in providers' keys from, before settings' `apiKeys`.
# pi 1.6's variables (env-api-keys.js) for the providers pi-lsp knows: OpenRouter's models load
# from models.json with its URLs filled in, so its key is read as pi reads it.
API_KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY",
                     "openrouter": "OPENROUTER_API_KEY"}


class PriceTier(msgspec.Struct, rename="camel"):
    """The prices of a reply whose input (cache reads and writes included) is above a count."""

    input_tokens_above: int
    input: float
    output: float
    cache_read: float
    cache_write: float


class Price(msgspec.Struct, rename="camel", omit_defaults=True):
    """US dollars per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    tiers: list[PriceTier] = msgspec.field(default_factory=list)

    def for_input(self, tokens: int) -> Price | PriceTier:
        """The prices for a reply of `tokens` input tokens: the tier with the highest count
        they are above, else these (pi 1.6's calculateCost)."""
        above = [tier for tier in self.tiers if tokens > tier.input_tokens_above]
        return max(above, key=lambda tier: tier.input_tokens_above) if above else self


class FallbackModel(msgspec.Struct, rename="camel"):
    """A model the server may answer with instead (pi 1.6's `allowedFallbackModels` entry)."""

    provider: str
    model: str
    cost: Price | None = None


Unset = msgspec.UnsetType  # a field left out; null is a wrong type, as pi 1.6's schema says
UNSET = msgspec.UNSET


class RoutingSort(msgspec.Struct):
    """OpenRouter's `sort` as an object (pi 1.6's schema; other keys go as written)."""

    by: str | Unset = UNSET
    partition: str | Unset | None = UNSET


class RoutingPrices(msgspec.Struct):
    """OpenRouter's `max_price`: a number or a text for each."""

    prompt: float | str | Unset = UNSET
    completion: float | str | Unset = UNSET
    image: float | str | Unset = UNSET
    audio: float | str | Unset = UNSET
    request: float | str | Unset = UNSET


class Percentiles(msgspec.Struct):
    """A throughput or latency cutoff at each percentile."""

    p50: float | Unset = UNSET
    p75: float | Unset = UNSET
    p90: float | Unset = UNSET
    p99: float | Unset = UNSET


class OpenRouterRouting(msgspec.Struct):
    """pi 1.6's schema of `openRouterRouting` (compat-schema.js), which refuses a models.json
    whose value has another type. Only checked: the value is sent as written, other keys too."""

    allow_fallbacks: bool | Unset = UNSET
    require_parameters: bool | Unset = UNSET
    data_collection: Literal["deny", "allow"] | Unset = UNSET
    zdr: bool | Unset = UNSET
    enforce_distillable_text: bool | Unset = UNSET
    order: list[str] | Unset = UNSET
    only: list[str] | Unset = UNSET
    ignore: list[str] | Unset = UNSET
    quantizations: list[str] | Unset = UNSET
    sort: str | RoutingSort | Unset = UNSET
    max_price: RoutingPrices | Unset = UNSET
    preferred_min_throughput: float | Percentiles | Unset = UNSET
    preferred_max_latency: float | Percentiles | Unset = UNSET


def routing_problem(routing: dict[str, Any]) -> str | None:
    """What in `routing` pi 1.6 refuses ("openRouterRouting.zdr: Expected `bool`, got `str`"),
    or None."""
    try:
        msgspec.convert(routing, OpenRouterRouting)
    except msgspec.ValidationError as error:
        text, _, where = str(error).partition(" - at `$")
        return f"openRouterRouting{where.rstrip('`')}: {text}"
    return None


# pi's `thinkingFormat` values pi-lsp sends: how reasoning is asked for on Chat Completions.
ThinkingFormat = Literal["openai", "openrouter", "deepseek", "together", "zai", "qwen",
                         "qwen-chat-template", "chat-template", "baseten", "string-thinking",
                         "ant-ling"]


class TemplateVariable(msgspec.Struct, rename="camel", omit_defaults=True):
    """A chat template value pi fills in from the thinking level (`{"$var": "thinking.effort"}`);
    `omitWhenOff`: left out where the model does not think."""

    var: Literal["thinking.enabled", "thinking.effort", "thinking.budget"] = \
        msgspec.field(name="$var")
    omit_when_off: bool = False


class GatewayRouting(msgspec.Struct, omit_defaults=True):
    """Vercel AI Gateway's upstream providers (pi 1.6's `vercelGatewayRouting`): the only ones
    it may use, and the order it tries them in."""

    only: list[str] | None = None
    order: list[str] | None = None


# A `chatTemplateKwargs` value: sent as written, or filled in (pi 1.6's ChatTemplateKwargValue).
TemplateValue = str | int | float | bool | None | TemplateVariable


class Compat(msgspec.Struct, rename="camel", omit_defaults=True):
    """pi's `compat` flags for OpenAI-compatible servers, and the Anthropic one pi-lsp reads;
    None means "detect from the server"."""

    supports_store: bool | None = None
    supports_developer_role: bool | None = None
    supports_reasoning_effort: bool | None = None
    supports_usage_in_streaming: bool | None = None
    supports_strict_mode: bool | None = None
    supports_finish_reason: bool | None = None
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] | None = None
    requires_tool_result_name: bool | None = None
    # A user message right after tool results gets pi's made-up assistant reply before it (a
    # host refusing that order); an assistant message without text is sent "", never null.
    requires_assistant_after_tool_result: bool | None = None
    requires_non_null_assistant_content: bool | None = None
    requires_thinking_as_text: bool | None = None
    # The top-level field that caps reasoning at the level's budget (answer and reasoning share
    # the output limit); `supportsThinkingTokenBudget` names vLLM's `thinking_token_budget`.
    thinking_token_budget_field: Literal["thinking_token_budget", "thinking_budget",
                                         "thinking_budget_tokens"] | None = None
    supports_thinking_token_budget: bool | None = None
    # OpenRouter's provider routing preferences (which upstream providers, their data policy),
    # sent as the body's `provider` (pi 1.6's `openRouterRouting`).
    open_router_routing: dict[str, Any] | None = None
    # Vercel AI Gateway's, sent as the body's `providerOptions.gateway`.
    vercel_gateway_routing: GatewayRouting | None = None
    requires_tools_with_tool_history: bool | None = None
    requires_reasoning_content_on_assistant_messages: bool | None = None
    thinking_format: ThinkingFormat | None = None
    # thinkingFormat "chat-template": the body's `chat_template_kwargs` (a Qwen or GLM template's
    # own switches), each value as written or filled in from the level.
    chat_template_kwargs: dict[str, TemplateValue] | None = None
    # thinkingFormat "baseten": the body's `chat_template_args`, filled in the same way.
    chat_template_args: dict[str, TemplateValue] | None = None
    # z.ai: `"tool_stream": true` with the tools, so a call's arguments stream as written.
    zai_tool_stream: bool | None = None
    # vLLM: the body's `priority` (lower goes first, under `--scheduling-policy priority`).
    vllm_priority: int | float | None = None
    send_session_affinity_headers: bool | None = None
    session_affinity_format: Literal["openai", "openai-nosession", "openrouter"] | None = None
    prompt_cache_key_mode: Literal["auto", "enabled", "disabled"] | None = None
    # Anthropic: the model thinks adaptively at an effort, never within a token budget.
    force_adaptive_thinking: bool | None = None
    # Anthropic: each reply's effort is set by a system message before it, the top-level
    # effort staying fixed (pi 1.6's `supportsMidConvoEffort`).
    supports_mid_convo_effort: bool | None = None
    # Anthropic: system messages and tool changes after the first go as such, in place (pi
    # 1.6's `supportsMidConvoSystemMessages`, `supportsMidConvoToolChanges`).
    supports_mid_convo_system_messages: bool | None = None
    supports_mid_convo_tool_changes: bool | None = None
    # Chat Completions, with supportsMidConvoSystemMessages: a tool added later is declared
    # where it was, in a system message of its own (Kimi's form; pi 1.6's
    # `supportsMidConvoToolAdditions`).
    supports_mid_convo_tool_additions: bool | None = None
    # Responses, with supportsMidConvoSystemMessages and no additional_tools items: a tool added
    # later is loaded where it was, as a client tool search's call and output (pi 1.6's
    # `supportsToolSearch`).
    supports_tool_search: bool | None = None
    # Responses: tools are declared in `additional_tools` input items where system messages
    # go in place, each change said where it happened (pi 1.6's `supportsAdditionalTools`).
    supports_additional_tools: bool | None = None
    # Responses: the host takes `max_output_tokens` (pi 1.6's `supportsMaxOutputTokens`, on
    # unless said otherwise: some Codex-protocol gateways refuse it).
    supports_max_output_tokens: bool | None = None
    # Responses: the cache is set by `prompt_cache_options`, not `prompt_cache_retention` (pi
    # 1.6's `supportsExplicitPromptCacheMode`).
    supports_explicit_prompt_cache_mode: bool | None = None
    # Anthropic: the host takes a thinking block with an empty signature back, so unsigned
    # thinking is replayed as thinking, not text (pi 1.6's `allowEmptySignature`).
    allow_empty_signature: bool | None = None
    # Anthropic: the host takes `cache_control` on a tool definition (pi 1.6's
    # `supportsCacheControlOnTools`, on unless said otherwise: Fireworks refuses it).
    supports_cache_control_on_tools: bool | None = None
    # Anthropic: the host takes no `eager_input_streaming` on a tool (pi 1.6's
    # `supportsEagerToolInputStreaming`, on unless false), so a request with tools asks for
    # the older fine-grained tool streaming beta instead.
    supports_eager_tool_input_streaming: bool | None = None
    # Anthropic: a tool asking for constrained sampling is sent strict (pi's
    # `supportsStrictTools`; every Claude in pi 1.6's catalog, off for other models).
    supports_strict_tools: bool | None = None
    # The server keeps a prompt cached longer when asked (PI_CACHE_RETENTION=long): pi
    # 1.6's `supportsLongCacheRetention`, on unless a model or a host turns it off.
    supports_long_cache_retention: bool | None = None
    # Chat Completions: Anthropic's `cache_control` marks on the system prompt, the last tool
    # and the newest message's text (pi's `cacheControlFormat`; OpenRouter's Claudes).
    cache_control_format: Literal["anthropic"] | None = None
    # Anthropic: models the server may answer with when this one cannot (`fallbacks`).
    allowed_fallback_models: list[FallbackModel] | None = None
    # Checked only, as pi 1.6 checks them: pi-lsp sends no temperature and uses no message
    # threads, which is all these turn off (pi's `supportsTemperature`, `supportsMessageThreads`).
    supports_temperature: bool | None = None
    supports_message_threads: bool | None = None

    def __post_init__(self) -> None:
        # A wrong-typed routing preference would go to OpenRouter as written (pi refuses it).
        problem = self.open_router_routing and routing_problem(self.open_router_routing)
        if problem:
            raise ValueError(problem)

    def over(self, base: Compat) -> Compat:
        """These flags, with `base` filling the ones left unset."""
        fields = {name: getattr(self, name) if getattr(self, name) is not None
                  else getattr(base, name) for name in self.__struct_fields__}
        # Merged key by key, as pi 1.6's mergeCompat: a model's `order` keeps its provider's
        # `data_collection: "deny"` and `zdr`.
        for name in MERGED_BY_KEY:
            mine, theirs = getattr(self, name), getattr(base, name)
            if mine is not None and theirs is not None:
                fields[name] = {**theirs, **mine}
        if self.vercel_gateway_routing is not None and base.vercel_gateway_routing is not None:
            fields["vercel_gateway_routing"] = msgspec.convert(
                {**msgspec.to_builtins(base.vercel_gateway_routing),
                 **msgspec.to_builtins(self.vercel_gateway_routing)}, GatewayRouting)
        return Compat(**fields)


# The `compat` objects pi 1.6's mergeCompat merges one level deep, not replaces
# (`vercel_gateway_routing` too).
MERGED_BY_KEY = ("open_router_routing", "chat_template_kwargs", "chat_template_args")


class ModelInfo(msgspec.Struct, rename="camel"):
    provider: str
    id: str
    context_window: int
    max_tokens: int
    price: Price
    reasoning: bool = True
    api: str = ANTHROPIC_API
    name: str | None = None
    input: list[str] = msgspec.field(default_factory=lambda: ["text"])
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    # From your own models.json: header values are pi's `$NAME` templates (models_file.
    # model_headers). settings.json's models, which a project may write, never keep it.
    resolve_headers: bool = False
    # Where `headers` were written ("FILE: providers.P.models[0].headers"), which a refusal of
    # one names; None: a settings.json model's (named by the model).
    headers_where: str | None = None
    compat: Compat = msgspec.field(default_factory=Compat)
    # pi's `thinkingLevelMap`: the effort sent for a level; None: the level is not sent.
    thinking_level_map: dict[str, str | None] = msgspec.field(default_factory=dict)
    # models.json's fields laid over each OpenAI-compatible request body (providers.sampling).
    sampling_params: dict[str, Any] = msgspec.field(default_factory=dict)
    sampling_params_by_thinking_level: dict[str, dict[str, Any]] = msgspec.field(
        default_factory=dict)
    base_url: str | None = None  # the provider's, filled in by the registry
    # models.json's own `baseUrl` for the model (pi 1.6: "Overrides the provider baseUrl"): its
    # requests go there, through a client of its own (factory). Never settings.json's.
    own_url: str | None = None
    # The provider's headers (models.json) set `anthropic-beta`, filled in by the registry: that
    # header goes with every request, so pi's own betas are not asked for (anthropic._betas).
    provider_beta: bool = False


class ProviderConfig(msgspec.Struct):
    """How to reach a provider: its endpoint, wire format, key and extra headers."""

    name: str
    api: str
    base_url: str | None = None
    api_key: str | None = None  # as written: a literal, a `$NAME` template, or !command
    key_file: str | None = None  # the models.json `api_key` was written in
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    source: str = "built in"  # the file that configured it, for error messages
    # From a project's models.json: the key and headers are sent as written, and when it
    # changed where requests go the user's own key (environment, apiKeys) is not sent.
    literal_key: bool = False
    literal_headers: bool = False
    user_key: bool = True
    # The environment variables the user's own models.json names for this provider, read
    # before a project's file is merged in: a project's override must not un-hide them.
    key_variables: frozenset[str] = frozenset()
    # models.json's `authHeader`: the key is sent as `Authorization: Bearer` too (a gateway
    # in front of Anthropic's API that reads that header, not `x-api-key`).
    auth_header: bool = False


BUILT_IN_PROVIDERS: tuple[ProviderConfig, ...] = (
    ProviderConfig("anthropic", ANTHROPIC_API),
    ProviderConfig("openai", RESPONSES_API, "https://api.openai.com/v1"),
)


# pi 1.6's built-in OpenRouter provider (pi-ai's providers/openrouter.js and its data file),
# which pi-lsp knows only as a models.json entry names it: where its models on each API are
# served, and which of its models are on Anthropic's API (the rest are on Chat Completions).
OPENROUTER = "openrouter"
OPENROUTER_URLS = {ANTHROPIC_API: "https://openrouter.ai/api",
                   CHAT_API: "https://openrouter.ai/api/v1"}
OPENROUTER_ANTHROPIC_MODELS = frozenset({
    "anthropic/claude-fable-5", "anthropic/claude-fable-5.1", "anthropic/claude-fable-5.2",
    "anthropic/claude-haiku-4.5", "anthropic/claude-haiku-5.5", "anthropic/claude-opus-4.1",
    "anthropic/claude-opus-4.5", "anthropic/claude-opus-4.6", "anthropic/claude-opus-4.7",
    "anthropic/claude-opus-4.8", "anthropic/claude-opus-5", "anthropic/claude-opus-5.5",
    "anthropic/claude-sonnet-4.5", "anthropic/claude-sonnet-4.6", "anthropic/claude-sonnet-5",
    "anthropic/claude-sonnet-5.5", "~anthropic/claude-fable-latest",
    "~anthropic/claude-haiku-latest", "~anthropic/claude-opus-latest",
    "~anthropic/claude-sonnet-latest"})


def openrouter_defaults(model_id: str | None, api: str | None) -> tuple[str, str]:
    """The API and base URL pi 1.6 gives a models.json model of its OpenRouter provider where
    the file names neither (provider-composer's findModelDefaults): those of its model of that
    id, else of its first model on `api`, else of its first Chat Completions model."""
    found = ANTHROPIC_API if model_id in OPENROUTER_ANTHROPIC_MODELS or api == ANTHROPIC_API \
        else CHAT_API
    return found, OPENROUTER_URLS[found]


def _from_pi(provider: ProviderConfig, facts: dict[str, Any]) -> ModelInfo:
    """A model of pi's catalog (pi16_models) on its provider's API."""
    return ModelInfo(provider.name, facts["id"], facts["contextWindow"], facts["maxTokens"],
                     msgspec.convert(facts["cost"], Price), reasoning=facts["reasoning"],
                     api=provider.api, name=facts["name"], input=list(facts["input"]),
                     compat=msgspec.convert(facts.get("compat", {}), Compat),
                     thinking_level_map=dict(facts.get("thinkingLevelMap", {})))


# Every model pi 1.6's catalog has for the built-in providers, with its facts and in its order
# (pi-ai's providers/data files, written out by tests/pi16_catalog.py).
BUILT_IN: tuple[ModelInfo, ...] = tuple(
    _from_pi(provider, facts) for provider in BUILT_IN_PROVIDERS
    for facts in MODELS[provider.name])
# pi 1.6's defaultModelPerProvider (model-resolver.js), in its order: the first provider with a
# key wins (initial.py). Most are providers pi-lsp has only as a models.json declares them.
DEFAULT_MODEL_PER_PROVIDER: dict[str, str] = {
    "amazon-bedrock": "us.anthropic.claude-opus-5-5",
    "ant-ling": "Ring-2.6-1T",
    "anthropic": "claude-opus-5-5",
    "openai": "gpt-6.2-sol",
    "azure": "gpt-6.2-sol",
    "openai-codex": "gpt-6.2-sol",
    "radius": "balanced",
    "nvidia": "nvidia/nemotron-3.5-super-vl-120b-a12b",
    "deepseek": "deepseek-v4-pro",
    "google": "gemini-4-argon",
    "google-vertex": "gemini-4-argon",
    "github-copilot": "gpt-6.1-sol",
    "openrouter": "moonshotai/kimi-k2.7-code",
    "vercel-ai-gateway": "zai/glm-5.3",
    "xai": "grok-4.7",
    "groq": "openai/gpt-oss-120b",
    "cerebras": "gpt-oss-120b",
    "zai": "glm-5.3",
    "zai-coding-cn": "glm-5.3",
    "mistral": "devstral-medium-latest",
    "minimax": "MiniMax-M3",
    "minimax-cn": "MiniMax-M3",
    "moonshotai": "kimi-k2.7-code",
    "moonshotai-cn": "kimi-k2.7-code",
    "huggingface": "moonshotai/Kimi-K2.7-Code",
    "fireworks": "accounts/fireworks/models/kimi-k3",
    "together": "moonshotai/Kimi-K3",
    "baseten": "zai-org/GLM-5.3",
    "opencode": "kimi-k2.7-code",
    "opencode-go": "kimi-k3.1-pro",
    "kimi-coding": "kimi-for-coding",
    "meta": "muse-spark-1.3",
    "cloudflare-workers-ai": "@cf/moonshotai/kimi-k2.7-code",
    "cloudflare-ai-gateway": "workers-ai/@cf/moonshotai/kimi-k2.7-code",
    "qwen-token-plan": "qwen3.8-max",
    "qwen-token-plan-cn": "qwen3.8-max",
    "qwen-token-plan-individual": "qwen3.8-max",
    "qwen-token-plan-individual-cn": "qwen3.8-max",
    "xiaomi": "mimo-v2.6-pro",
    "xiaomi-token-plan-cn": "mimo-v2.6-pro",
    "xiaomi-token-plan-ams": "mimo-v2.6-pro",
    "xiaomi-token-plan-sgp": "mimo-v2.6-pro",
}
DEFAULT_MODEL = DEFAULT_MODEL_PER_PROVIDER["anthropic"]
DEFAULT_SUMMARY_MODEL = "claude-haiku-4-5"
DEFAULT_CONTEXT_WINDOW = 128_000
DEFAULT_MAX_TOKENS = 16_384


def native_tool_changes(model: ModelInfo) -> bool:
    """Whether pi 1.6 says tool changes mid-conversation to this model: Anthropic's in system
    messages (with tools), Responses' in `additional_tools` items (never on Chat Completions:
    the current tools go at the top)."""
    compat = model.compat
    changes = compat.supports_additional_tools if model.api == RESPONSES_API else \
        compat.supports_mid_convo_tool_changes if model.api == ANTHROPIC_API else False
    return bool(compat.supports_mid_convo_system_messages and changes)


def tool_additions_in_place(model: ModelInfo) -> bool:
    """Whether pi 1.6 declares tools added mid-conversation where they were added, and no other
    change there (resolveTranscriptTools "additions"): in a system message of their own on Chat
    Completions (`supportsMidConvoToolAdditions`), as a tool search's result on Responses
    without additional_tools items (`supportsToolSearch`)."""
    compat = model.compat
    additions = compat.supports_mid_convo_tool_additions if model.api == CHAT_API else \
        compat.supports_tool_search and not compat.supports_additional_tools \
        if model.api == RESPONSES_API else False
    return bool(compat.supports_mid_convo_system_messages and additions)


def keeps_system_messages(model: ModelInfo) -> bool:
    """Whether pi 1.6 sends this model the system messages after the first in place (a prompt
    or tool change keeps the cached prefix), not folded into the first."""
    return model.api in (ANTHROPIC_API, RESPONSES_API, CHAT_API) and \
        bool(model.compat.supports_mid_convo_system_messages)


class ModelRegistry:
    def __init__(self, extra: list[ModelInfo] | None = None,
                 providers: list[ProviderConfig] | None = None,
                 saved_key_variables: frozenset[str] = frozenset()) -> None:
        self._models = {(m.provider, m.id): m for m in (*BUILT_IN, *(extra or []))}
        self._providers = {p.name: p for p in (*BUILT_IN_PROVIDERS, *(providers or []))}
        self._saved_key_variables = saved_key_variables  # named by auth.json's keys

    def find(self, provider: str, model_id: str) -> ModelInfo | None:
        found = self._models.get((provider, model_id))
        if found is None and provider == "anthropic":
            # Dated snapshots (claude-haiku-4-5-20251001) price like their alias.
            alias = model_id.rsplit("-", 1)[0]
            found = self._models.get((provider, alias)) if model_id[-8:].isdigit() else None
        return self._with_provider(found) if found is not None else None

    def get(self, provider: str, model_id: str) -> ModelInfo:
        """The model's facts; an id the catalog lacks gets those of the model `stand_in`
        names under its own id, as pi 1.6 gives it them, else a conservative window and no
        price (a provider without models)."""
        found = self.find(provider, model_id)
        if found is not None:
            return found
        base = self.stand_in(provider)
        if base is not None:
            return msgspec.structs.replace(base, id=model_id, name=model_id)
        config = self._providers.get(provider)
        return self._with_provider(ModelInfo(
            provider, model_id, DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_TOKENS, Price(0, 0, 0, 0),
            reasoning=config is None or config.api == ANTHROPIC_API,
            api=config.api if config else ANTHROPIC_API))

    def stand_in(self, provider: str) -> ModelInfo | None:
        """The model whose facts an id of `provider` the catalog lacks takes: pi's default for
        the provider, else its first model (pi 1.6's model-resolver.js buildFallbackModel)."""
        default = DEFAULT_MODEL_PER_PROVIDER.get(provider)
        found = self.find(provider, default) if default is not None else None
        return found or next((self._with_provider(m) for m in self._models.values()
                              if m.provider == provider), None)

    def _with_provider(self, model: ModelInfo) -> ModelInfo:
        """`model` with what its provider's config adds: its endpoint, and whether its headers
        set `anthropic-beta` (their names only: a value may be a secret)."""
        config = self._providers.get(model.provider)
        if config is None:
            return model
        base_url = model.base_url or config.base_url
        beta = any(name.lower() == "anthropic-beta" for name in config.headers)
        if (base_url, beta) == (model.base_url, model.provider_beta):
            return model
        return msgspec.structs.replace(model, base_url=base_url, provider_beta=beta)

    def provider(self, name: str) -> ProviderConfig | None:
        return self._providers.get(name)

    def all(self) -> list[ModelInfo]:
        return list(self._models.values())

    def key_variables(self) -> frozenset[str]:
        """The environment variables keys are read from: pi-lsp's own, and those your own
        models.json's `apiKey` and header values and auth.json's keys may name (a project's
        values are literals)."""
        names = set(API_KEY_VARIABLES.values()) | self._saved_key_variables
        for config in self._providers.values():
            names |= config.key_variables
        return frozenset(names)


def detect_compat(provider: str, base_url: str, model_id: str) -> Compat:
    """pi 1.6's Chat Completions defaults for a host and model (its `detectCompat`); a model's
    own `compat` flags are laid over these."""
    url = base_url.lower()
    zai = provider in ("zai", "zai-coding-cn") or "api.z.ai" in url or "open.bigmodel.cn" in url
    together = provider == "together" or "api.together.ai" in url or "api.together.xyz" in url
    moonshot = provider in ("moonshotai", "moonshotai-cn") or "api.moonshot." in url
    openrouter = provider == "openrouter" or "openrouter.ai" in url
    workers_ai = provider == "cloudflare-workers-ai" or "api.cloudflare.com" in url
    ai_gateway = provider == "cloudflare-ai-gateway" or "gateway.ai.cloudflare.com" in url
    nvidia = provider == "nvidia" or "integrate.api.nvidia.com" in url
    ant_ling = provider == "ant-ling" or "api.ant-ling.com" in url
    cerebras = provider == "cerebras" or "cerebras.ai" in url
    deepseek = provider == "deepseek" or "deepseek.com" in url
    grok = provider == "xai" or "api.x.ai" in url
    chutes = "chutes.ai" in url
    opencode = provider == "opencode" or "opencode.ai" in url
    non_standard = (nvidia or cerebras or grok or together or chutes or deepseek or zai
                    or moonshot or opencode or workers_ai or ai_gateway or ant_ling)
    max_tokens = chutes or deepseek or moonshot or ai_gateway or together or nvidia or ant_ling \
        or zai
    # The developer role is OpenAI's own; local servers' chat templates often reject it.
    openai_host = provider == "openai" or "api.openai.com" in url
    thinking: ThinkingFormat = "deepseek" if deepseek else "zai" if zai else \
        "together" if together else "ant-ling" if ant_ling else \
        "openrouter" if openrouter else "openai"
    return Compat(
        supports_store=not non_standard,
        supports_developer_role=openai_host,
        supports_reasoning_effort=not (grok or zai or moonshot or together or ai_gateway
                                       or nvidia or ant_ling),
        supports_usage_in_streaming=True,
        supports_strict_mode=False,
        supports_finish_reason=True,
        max_tokens_field="max_tokens" if max_tokens else "max_completion_tokens",
        requires_tool_result_name=False,
        requires_assistant_after_tool_result=False,
        requires_non_null_assistant_content=False,
        requires_thinking_as_text=False,
        requires_tools_with_tool_history=False,
        requires_reasoning_content_on_assistant_messages=deepseek,
        thinking_format=thinking,
        send_session_affinity_headers=openrouter,
        session_affinity_format="openrouter" if openrouter else "openai",
        prompt_cache_key_mode="auto",
        supports_long_cache_retention=not (together or workers_ai or ai_gateway or nvidia
                                           or ant_ling),
        # (by the provider's name alone, as pi detects it)
        cache_control_format="anthropic" if provider == "openrouter"
        and model_id.startswith("anthropic/") else None,
    )
