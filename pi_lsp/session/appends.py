"""The typed append API: one method per entry type pi writes, each building its entry under
the leaf and handing it to the tree's one writer, `_append`."""

from __future__ import annotations

from typing import Any

import msgspec

from pi_lsp.session.entries import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryEntry,
    BranchSummaryMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    MessageLine,
    ModelChangeEntry,
    Replacement,
    SessionInfoEntry,
    SystemCheckpoint,
    ThinkingLevelChangeEntry,
    UserBlock,
    clean_session_name,
)
from pi_lsp.session.ids import iso_now, iso_to_ms, new_entry_id
from pi_lsp.session.journal import Record, written_id
from pi_lsp.session.jsontext import js_json
from pi_lsp.session.replyorder import reply_json


class EntryAppends:
    """Mixed into `SessionTree`, which holds the leaf and the index and writes entries."""

    leaf_id: str | None
    idless_leaf: Record | None
    by_id: dict[str, Record]

    def _append(self, entry: Entry | MessageLine) -> str:
        raise NotImplementedError  # SessionTree._append

    def _common(self) -> dict[str, Any]:
        return {"id": new_entry_id(self.by_id), "parent_id": self._parent_id(),
                "timestamp": iso_now()}

    def _parent_id(self) -> Any:
        """pi's `parentId: this.leafId`; under an id-less leaf, its id as the line holds it (0,
        false, null; UNSET, so no key, where it has none), which every reader takes as none,
        written as JSON.stringify writes it (0.0, -0.0, 0e5 as 0)."""
        if self.leaf_id is None and self.idless_leaf is not None:
            held = written_id(self.idless_leaf)
            return held if held is msgspec.UNSET else msgspec.Raw(js_json(held))
        return self.leaf_id

    def append_message(self, message: AgentMessage, entry_id: str | None = None) -> str:
        """Write `message`; as `entry_id` where given and no entry of the file has it."""
        if isinstance(message, BranchSummaryMessage | CompactionSummaryMessage):
            raise ValueError("summary messages are made from entries and are never appended")
        common = self._common()
        if entry_id is not None and entry_id not in self.by_id:
            common["id"] = entry_id
        if isinstance(message, AssistantMessage):
            return self._append(MessageLine(**common, message=reply_json(message)))
        return self._append(MessageEntry(**common, message=message))

    def append_thinking_level_change(self, level: str) -> str:
        return self._append(ThinkingLevelChangeEntry(**self._common(), thinking_level=level))

    def append_model_change(self, provider: str, model_id: str) -> str:
        return self._append(ModelChangeEntry(**self._common(), provider=provider,
                                             model_id=model_id))

    def append_compaction(self, summary: str, first_kept_entry_id: str, tokens_before: int,
                          details: Any = None, usage: msgspec.Raw | None = None,
                          from_hook: bool | None = None,
                          system_message: SystemCheckpoint | None = None) -> str:
        """A compaction; `usage` is the summary model's, as pi writes it; `system_message` (the
        replayed prompt and tools) is stored with the compaction's own time, as pi 1.6 does."""
        common = self._common()
        if system_message is not None:
            system_message = msgspec.structs.replace(
                system_message, timestamp=iso_to_ms(common["timestamp"]) or 0)  # iso_now()
        return self._append(CompactionEntry(
            **common, summary=summary, first_kept_entry_id=first_kept_entry_id,
            tokens_before=tokens_before, details=details, usage=usage, from_hook=from_hook,
            system_message=system_message,
        ))

    def append_branch_summary(self, from_id: str, summary: str, details: Any = None,
                              from_hook: bool | None = None, usage: msgspec.Raw | None = None
                              ) -> str:
        return self._append(BranchSummaryEntry(
            **self._common(), from_id=from_id, summary=summary, details=details, usage=usage,
            from_hook=from_hook,
        ))

    def append_custom(self, custom_type: str, data: Any = None) -> str:
        return self._append(CustomEntry(**self._common(), custom_type=custom_type, data=data))

    def append_custom_message(self, custom_type: str, content: str | list[UserBlock],
                              display: bool, details: Any = None) -> str:
        return self._append(CustomMessageEntry(
            **self._common(), custom_type=custom_type, content=content, display=display,
            details=details,
        ))

    def append_context_edit(self, target_id: str, replacement: Replacement | None) -> str:
        """pi 1.6's edit of `target_id` in the context from here on (None omits it); the
        caller checks the target (`context/edits.py`)."""
        return self._append(ContextEditEntry(**self._common(), target_id=target_id,
                                             replacement=replacement))

    def append_session_info(self, name: str) -> str:
        """Name the session; an empty or blank name clears it."""
        return self._append(SessionInfoEntry(**self._common(), name=clean_session_name(name)))
