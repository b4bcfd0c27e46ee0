"""The context at an entry in each of its three layers, as rows of one type: `agent` (pi's
messages), `llm` (what the model is given) and `request` (what the provider is sent, with the
agent's prompt and tools). The preview, the harness and the CLI all read this one function."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import msgspec

from pi_lsp.context.build import branch_path, branch_settings, settings_at
from pi_lsp.context.convert import convert_with_sources, prepare_with_sources
from pi_lsp.context.edits import EditMark, edit_marks
from pi_lsp.context.messages import LazyMessages, decode_path, decode_records
from pi_lsp.context.projection import (
    ContextSettings,
    ModelRef,
    ProjectedEntry,
    Projection,
    project_path,
)
from pi_lsp.context.replay import (
    additive_prefix,
    current_system_message,
    current_tools,
    system_patch,
    system_text,
)
from pi_lsp.context.tokens import estimate_tokens, usage_tokens
from pi_lsp.providers.base import MissingApiKeyError, ModelRequest, ToolSpec, tool_spec
from pi_lsp.providers.registry import (
    ANTHROPIC_API,
    RESPONSES_API,
    ModelInfo,
    ModelRegistry,
    keeps_system_messages,
    native_tool_changes,
    tool_additions_in_place,
)
from pi_lsp.providers.thinking import clamped_level
from pi_lsp.providers.wire import UnknownProviderError
from pi_lsp.session.entries import (
    AssistantMessage,
    ModelMessage,
    ReadMessage,
    SystemMessage,
    UnreadMessage,
    decode_message,
    encoder,
    head_decoder,
    read_message,
    role_of,
)
from pi_lsp.session.jsontext import stringify
from pi_lsp.session.systemfields import (
    lacks_parameters,
    listed_tools,
    parameterless_tools,
    tool_key,
)
from pi_lsp.session.tree import SessionTree

Layer = Literal["agent", "llm", "request"]


class LayerRow(msgspec.Struct, rename="camel", omit_defaults=True):
    """One message of a layer: the entry it came from (None: made for the request), its role,
    its estimate and the message itself; `edited` when a context edit replaced its content."""

    entry_id: str | None
    role: str
    tokens: int
    message: msgspec.Raw
    edited: bool = False


class AgentSetup(msgspec.Struct):
    """What the agent adds to a session's context to make a request: its models, and the
    prompt sections and tool declarations the session's replayed ones are patched to."""

    registry: ModelRegistry
    default_model: tuple[str, str]
    default_thinking_level: str  # for a path that sets none (pi 1.6 resumes such a session so)
    sections: dict[str, str]
    tools: list[dict[str, Any]]
    # pi's --model and --thinking on a session it continues, over the session's settings
    run_model: tuple[str, str] | None = None
    run_thinking_level: str | None = None


class RowHead(msgspec.Struct):
    """A row before it is read: `body` is the raw message, or the converted or prepared one;
    its role and estimate are worked out, and it is encoded, only when the row is shown."""

    entry_id: str | None
    body: Any
    edited: bool = False

    def row(self) -> LayerRow:
        message: ReadMessage
        if isinstance(self.body, msgspec.Raw):
            raw, message = self.body, read_message(self.body)
        else:
            raw, message = msgspec.Raw(encoder.encode(self.body)), self.body
        # One pi-lsp cannot type counts as the total counts it: pi's estimate reads it as written.
        role = "?" if isinstance(message, UnreadMessage) else role_of(message)
        return LayerRow(self.entry_id, role, estimate_tokens(message), raw, self.edited)


class ContextLayer(msgspec.Struct):
    leaf_id: str | None
    layer: Layer
    heads: list[RowHead]
    thinking_level: str
    model: ModelRef | None  # the one set on the path
    total_tokens: int
    reported_at: str | None  # the reply whose reported usage the total starts from
    reported_tokens: int
    messages_after: int  # estimated one by one, after that reply
    request: ModelRequest | None = None  # the request layer's
    edits: list[EditMark] = msgspec.field(default_factory=list)  # the context edits in force

    @property
    def rows(self) -> list[LayerRow]:
        """Every row with its message (a long context is better read a page at a time)."""
        return self.rows_between(0, len(self.heads))

    def rows_between(self, start: int, stop: int) -> list[LayerRow]:
        return [head.row() for head in self.heads[start:stop]]


def model_at(settings: ContextSettings, registry: ModelRegistry, default: tuple[str, str]
             ) -> ModelInfo:
    """The model in force where `settings` were read, else the default."""
    if settings.model is not None:
        return registry.get(*settings.model.names())
    return registry.get(*default)


def lost_model(projection: Projection, registry: ModelRegistry,
               provider: Callable[[str], object]) -> tuple[tuple[str, str], str] | None:
    """The model a path with messages names and why pi 1.6 would not restore it on continuing
    (sdk.js: pi then warns and uses the default): its catalog lacks it, or `provider` cannot
    make its provider (provider_problem); else None. `run` and its preview both ask here."""
    model = projection.settings.model
    if model is None or not projection.messages:  # the default is in force already, as in pi
        return None
    names = model.names()
    if registry.find(*names) is None:
        return names, "pi-lsp's catalog has no such model"
    why = provider_problem(provider, names[0])
    return None if why is None else (names, why)


def provider_problem(provider: Callable[[str], object], name: str) -> str | None:
    """Why `provider` cannot make `name`'s provider (unconfigured, or no key: pi's
    `hasConfiguredAuth` false); None when it can."""
    try:
        provider(name)
    except (MissingApiKeyError, UnknownProviderError) as error:
        return str(error)
    return None


def with_run_choices(settings: ContextSettings, model: tuple[str, str] | None,
                     level: str | None) -> ContextSettings:
    """The session's settings with a run's own model and thinking level over them."""
    if model is not None:
        settings = msgspec.structs.replace(settings, model=ModelRef(*model))
    if level is not None:
        settings = msgspec.structs.replace(settings, thinking_level=level,
                                           thinking_level_set=True)
    return settings


def asked_level(settings: ContextSettings, default_level: str) -> str:
    """The level a turn asks for: the one set on the path, else the default."""
    return settings.thinking_level if settings.thinking_level_set else default_level


def level_in_force(settings: ContextSettings, registry: ModelRegistry,
                   default_model: tuple[str, str], default_level: str) -> str:
    """The level a turn thinks at, as pi holds it: the one asked for, clamped to the model."""
    return clamped_level(model_at(settings, registry, default_model),
                         asked_level(settings, default_level))


def _tool_specs(tools: Sequence[Any]) -> list[ToolSpec]:
    return [tool_spec(tool) for tool in tools]


class UnsendableToolError(ValueError):
    """A tool the session declares that the request's model cannot be sent."""


def refuse_parameterless_tools(tree: SessionTree, read: Sequence[tuple[str | None, Any]],
                               lead: Lead, model: ModelInfo) -> None:
    """Raise, naming the line and field that declares it, where a tool without parameters
    would go to an Anthropic model: pi 1.6 fails making that request too."""
    if model.api != ANTHROPIC_API:
        return
    sent = list(lead.tools)
    if lead.tool_changes_in_place:  # later additions are sent where they were made
        sent += [tool for _, message in lead.after if isinstance(message, SystemMessage)
                 for tool in listed_tools(message.tools_added)]
    names = {tool_key(tool) for tool in sent if lacks_parameters(tool)}
    # the declaration in force for a name is the last one (a redefinition replaces it)
    for entry_id, message in reversed(read):
        if not isinstance(message, SystemMessage) or entry_id is None:
            continue
        found = [(index, tool) for index, tool in parameterless_tools(message)
                 if tool_key(tool) in names]
        if found:
            index, tool = found[0]
            raise UnsendableToolError(
                f"line {tree.by_id[entry_id].line}: toolsAdded[{index}] of system message "
                f"{entry_id} is {stringify(tool)[:80]}, a tool without parameters, which "
                f"cannot be sent to {model.id} (an Anthropic model; pi 1.6 fails on it too)")


def replayed_prompt(messages: Sequence[ReadMessage], agent: AgentSetup
                    ) -> tuple[str, list[Any]]:
    """The request's prompt and tools: the session's replayed ones with the patch a turn
    writes first (`system_patch_at`) applied."""
    replayed = current_system_message(messages)
    patch = system_patch(replayed, agent.sections, agent.tools, 0)
    system = current_system_message([replayed, patch]) if patch is not None else replayed
    if system is None:
        return "", []
    return system_text(system), listed_tools(system.tools_added)


Prepared = list[tuple[int | None, ModelMessage]]


class Lead(msgspec.Struct):
    """What goes first in a request: the prompt, the tools and (from a leading system message
    on a model that takes them mid-conversation) the tools it takes away, then the rest."""

    prompt: str
    tools: list[Any]  # declarations, as the session holds them
    tools_removed: list[Any]  # as the system message holds them
    after: Prepared
    tool_changes_in_place: bool
    additions_from: int | None = None  # see ModelRequest.additions_from


def prompt_in_place(prepared: Prepared, model: ModelInfo) -> Lead:
    """pi 1.6's request to a model that takes system messages mid-conversation: a leading
    system message's prompt and tools (and the tools it takes away) go first, the later ones
    stay in place so the cached prefix holds. Tool changes are said in place only where tools
    were declared first (on Responses, always: every tool goes in an input item); else the
    current tools go first."""
    first = prepared[0][1] if prepared else None
    lead = first if isinstance(first, SystemMessage) else None
    if tool_additions_in_place(model):
        return _with_additions(prepared, lead)
    declared = listed_tools(lead.tools_added) if lead is not None else []
    in_place = native_tool_changes(model) and (bool(declared) or model.api == RESPONSES_API)
    tools = declared if in_place else current_tools([message for _, message in prepared])
    if lead is None:
        return Lead("", tools, [], prepared, in_place)
    return Lead(system_text(lead), tools, listed_tools(lead.tools_removed), prepared[1:],
                in_place)


def _with_additions(prepared: Prepared, lead: SystemMessage | None) -> Lead:
    """`prompt_in_place` where tools added later are declared in place (Chat Completions): the
    tools in force after the last change an addition cannot say go first (replay's
    additive_prefix), each later system message's additions where it is."""
    systems = [message for _, message in prepared if isinstance(message, SystemMessage)]
    folded = additive_prefix(systems, lead is not None)
    tools = current_tools(systems[:folded])
    if lead is None:
        return Lead("", tools, [], prepared, False, folded)
    return Lead(system_text(lead), tools, listed_tools(lead.tools_removed), prepared[1:], False,
                folded - 1)


def system_patch_at(tree: SessionTree, leaf_id: str | None, agent: AgentSetup,
                    timestamp: int) -> SystemMessage | None:
    """What a turn from `leaf_id` writes first so the session replays the agent's prompt and
    tools (everything on a branch that has no system message yet), or None."""
    systems = [decode_message(raw) for raw in project_path(tree.path_to(leaf_id)).messages
               if _is_system(raw)]
    return system_patch(current_system_message(systems), agent.sections, agent.tools,
                        timestamp)


def _is_system(raw: msgspec.Raw) -> bool:
    try:
        return head_decoder.decode(raw).role == "system"
    except msgspec.ValidationError:
        return False


def build_layer(tree: SessionTree, leaf_id: str | None, layer: Layer,
                agent: AgentSetup | None = None) -> ContextLayer:
    """The context at `leaf_id` in `layer`; the request layer needs the `agent`. Only what the
    total needs is read here: the rows are read when they are shown."""
    if layer == "request":  # what a turn sends: pi's branch, none at an id-less leaf
        decoded = decode_records(branch_path(tree, leaf_id))
    else:  # pi's context: up from an id-less last line too
        decoded = decode_path(tree, leaf_id)
    # With the agent, the model and level its next turn takes (on pi's branch, so the defaults
    # at an id-less leaf), which every layer's preview shows; else pi's context's own.
    settings = branch_settings(tree, leaf_id) if agent is not None else settings_at(tree, leaf_id)
    ids, messages = decoded.entry_ids, decoded.messages
    if agent is not None:
        settings = with_run_choices(settings, agent.run_model, agent.run_thinking_level)
    request = None
    if layer == "agent":
        heads = [RowHead(entry_id, raw) for entry_id, raw in zip(ids, messages.raws, strict=True)]
    elif layer == "llm":
        heads = [RowHead(ids[source], body)
                 for source, body in convert_with_sources(messages.raws)]
    else:
        assert agent is not None, "the request layer is made with the agent's setup"
        read = [(ids[source], _read_body(body, source, messages))
                for source, body in convert_with_sources(messages.raws)]
        readable = [(entry_id, m) for entry_id, m in read if not isinstance(m, UnreadMessage)]
        model = model_at(settings, agent.registry, agent.default_model)
        # converted: only the model layer's roles are left
        llm: list[ModelMessage] = [m for _, m in readable]  # type: ignore[misc]
        in_place = keeps_system_messages(model)
        prepared = prepare_with_sources(llm, keep_system=in_place)
        if in_place:
            patch = system_patch(current_system_message(llm), agent.sections, agent.tools, 0)
            prepared += [(None, patch)] if patch is not None else []
            lead = prompt_in_place(prepared, model)
        else:
            prompt, tools = replayed_prompt(messages, agent)
            lead = Lead(prompt, tools, [], prepared, True)
        refuse_parameterless_tools(tree, readable, lead, model)
        heads = [RowHead(readable[source][0] if source is not None else None, message)
                 for source, message in lead.after]
        request = ModelRequest(
            model=model, tool_changes_in_place=lead.tool_changes_in_place,
            additions_from=lead.additions_from,
            tools_removed=lead.tools_removed, system_prompt=lead.prompt,
            messages=[m for _, m in lead.after], tools=_tool_specs(lead.tools),
            # the level thought at, which the reply keeps as pi 1.6's does (clamped)
            thinking_level=level_in_force(settings, agent.registry, agent.default_model,
                                          agent.default_thinking_level),
            session_id=tree.header.id)
    anchor = decoded.anchor()  # as the total counts it, so its explanation agrees
    reply = messages[anchor] if anchor >= 0 else None
    edits = placed_marks(decoded.projection.entries, heads)
    return ContextLayer(
        leaf_id=leaf_id, layer=layer, heads=heads,
        # With the agent: the level its next turn thinks at (editors show it as the one in force).
        thinking_level=level_in_force(settings, agent.registry, agent.default_model,
                                      agent.default_thinking_level) if agent is not None
        else settings.thinking_level,
        model=settings.model,
        total_tokens=decoded.total_tokens(),
        reported_at=ids[anchor] if reply is not None else None,
        reported_tokens=usage_tokens(reply) if isinstance(reply, AssistantMessage) else 0,
        messages_after=len(messages) - anchor - 1,
        request=request, edits=edits,
    )


def _read_body(body: msgspec.Raw | ModelMessage, source: int, messages: LazyMessages
               ) -> ReadMessage:
    """A model-layer message as read: a passed-through one as its runtime message was, a custom
    message's user message (raw, as pi carries its blocks) read here."""
    if body is messages.raws[source]:
        return messages[source]
    return read_message(body) if isinstance(body, msgspec.Raw) else body


def placed_marks(entries: list[ProjectedEntry], rows: list[RowHead]) -> list[EditMark]:
    """The edits in force, each placed where its target is among `rows`; the rows of replaced
    targets are marked `edited`."""
    marks = edit_marks(entries)
    if not marks:
        return marks
    order = {entry.record.env.id: index for index, entry in enumerate(entries)}
    replaced = {mark.target_id for mark in marks if mark.kind == "replaced"}
    for row in rows:
        row.edited = row.entry_id in replaced
    for mark in marks:
        target, seen, mark.position = order[mark.target_id], -1, len(rows)
        for index, row in enumerate(rows):
            seen = order.get(row.entry_id, seen)
            if seen > target:
                mark.position = index
                break
    return marks
