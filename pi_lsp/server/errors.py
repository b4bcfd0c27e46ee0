"""The server's JSON-RPC error codes, and the log filter that keeps the errors it answers on
purpose out of the editor's log."""

from __future__ import annotations

import logging

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcServerNotInitialized

# In JSON-RPC's server range, clear of the codes LSP itself defines (-32001, -32002).
BUSY = -32010
FAILED = -32011
NOT_INITIALIZED = JsonRpcServerNotInitialized.CODE  # LSP's -32002


def server_error(message: str, code: int, data: object = None) -> JsonRpcException:
    """A JSON-RPC error in the server range (pygls' own constructor is untyped)."""
    return JsonRpcException(message=message, code=code, data=data)


class ExpectedErrors(logging.Filter):
    """pygls logs every error answer with a traceback; the ones pi-lsp raises on purpose (bad
    arguments, busy sessions) are answers, not faults, and stay out of the editor's log."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (isinstance(error, JsonRpcException) and
                    error.code in (JsonRpcInvalidParams.CODE, BUSY, FAILED, NOT_INITIALIZED))
