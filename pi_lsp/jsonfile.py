"""pi's JSON configuration files (settings.json, models.json): one object per file, or none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec


def read_object(path: Path, what: str, error: type[Exception]) -> dict[str, Any]:
    """The object in `path`, {} when there is no file; `error` names the file and what is wrong."""
    try:
        data = msgspec.json.decode(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, msgspec.DecodeError) as fault:
        raise error(f"{path}: cannot read {what} ({fault})") from None
    if not isinstance(data, dict):
        raise error(f"{path}: {what} must be a JSON object")
    return data
