"""pi-lsp's built-in models written from pi-ai 1.6's own lists (its providers/data files):
`python -m tests.pi16_catalog` where pi 1.6 is installed rewrites
pi_lsp/providers/pi16_models.py; test_builtin_catalog checks that file against pi's lists."""

from __future__ import annotations

import json
import pprint
from pathlib import Path
from typing import Any

from pi_lsp.providers.registry import BUILT_IN_PROVIDERS, Compat

DATA = Path("@earendil-works") / "pi-ai" / "dist" / "providers" / "data"
TARGET = Path(__file__).resolve().parent.parent / "pi_lsp" / "providers" / "pi16_models.py"
# What pi-lsp takes of a model: the rest is what pi knows of a provider (its URL), of image
# sizes and of cache lifetimes, which pi-lsp does not use.
KEPT = ("id", "name", "reasoning", "input", "cost", "contextWindow", "maxTokens",
        "thinkingLevelMap")
# pi's compat flags for request parts pi-lsp never sends (OpenAI's grammar tools; a
# temperature); a flag in neither list stops the writer.
UNSENT_FLAGS = frozenset({"supportsOpenAIGrammarTools", "supportsTemperature"})
HEADER = '''"""pi 1.6's built-in models of the providers pi-lsp builds in, as pi-ai 1.6 lists them
(its providers/data files), in its order. Written by `python -m tests.pi16_catalog`: do not
edit; a model's compat keeps the flags pi-lsp reads."""

from typing import Any

MODELS: dict[str, list[dict[str, Any]]] = '''


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


READ_FLAGS = frozenset(_camel(name) for name in Compat.__struct_fields__)


def _model(entry: dict[str, Any]) -> dict[str, Any]:
    """One model of pi's list as pi-lsp keeps it."""
    facts = {key: entry[key] for key in KEPT if key in entry}
    compat = entry.get("compat", {})
    unknown = set(compat) - READ_FLAGS - UNSENT_FLAGS
    if unknown:
        raise SystemExit(f"pi's {entry['id']} has compat flags pi-lsp has not placed: "
                         f"{sorted(unknown)} (add them to Compat or UNSENT_FLAGS)")
    kept = {flag: value for flag, value in compat.items() if flag in READ_FLAGS}
    if kept:
        facts["compat"] = kept
    return facts


def pi_models(pi16: Path) -> dict[str, list[dict[str, Any]]]:
    """Every chat model pi 1.6 lists for each built-in provider, on that provider's API."""
    catalog: dict[str, list[dict[str, Any]]] = {}
    for provider in BUILT_IN_PROVIDERS:
        data = json.loads((pi16 / DATA / f"{provider.name}.json").read_text("utf-8"))
        catalog[provider.name] = [_model(entry) for entry in data[provider.api].values()
                                  if entry.get("type") == "chat"]
    return catalog


def _entry(key: str, value: Any, indent: int) -> str:
    """`key: value,` at `indent`, the value wrapped within the line length under itself."""
    lead = " " * indent + repr(key) + ": "
    text = pprint.pformat(value, width=99 - len(lead), sort_dicts=False)
    return lead + text.replace("\n", "\n" + " " * len(lead)) + ",\n"


def source(catalog: dict[str, list[dict[str, Any]]]) -> str:
    """The module that holds `catalog`: a model's facts one to a line."""
    lines = [HEADER, "{\n"]
    for provider, models in catalog.items():
        lines.append(f"    {provider!r}: [\n")
        for model in models:
            lines += ["        {\n", *(_entry(key, value, 12) for key, value in model.items()),
                      "        },\n"]
        lines.append("    ],\n")
    return "".join([*lines, "}\n"])


def main() -> None:
    from tests.test_system_messages import PI16

    if not (PI16 / DATA).is_dir():
        raise SystemExit(f"pi 1.6 is not installed: no {PI16 / DATA}")
    TARGET.write_text(source(pi_models(PI16)), "utf-8")
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
