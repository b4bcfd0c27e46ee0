"""What the summary model is asked (pi-lsp's own wording, pi's headings)."""

from __future__ import annotations

SYSTEM = (
    "You write summaries of conversations between a user and an AI coding assistant, for "
    "another model that will carry the work on. Do not continue the conversation and do not "
    "answer any question asked in it. Reply with the summary alone, in the format requested."
)

_CHECKPOINT_FORMAT = """## Goal
What the user wants to achieve, in a sentence or two.

## Constraints & Preferences
- Requirements and preferences the user stated, or (none)

## Progress
### Done
- [x] Work that is finished
### In Progress
- [ ] Work that has started
### Blocked
- Anything that stops progress, or (none)

## Key Decisions
- **Decision**: the reason for it

## Next Steps
1. What to do next, in order

## Critical Context
- Values, names and errors the next model must know, or (none)"""

HISTORY = f"""Write a checkpoint of the conversation above that another model can resume from. \
Use exactly this Markdown layout:

{_CHECKPOINT_FORMAT}

Be concise, and keep exact file paths, function names and error messages."""

UPDATE = f"""The conversation above continues the work described in <previous-summary>. Write \
an updated checkpoint in exactly this Markdown layout:

{_CHECKPOINT_FORMAT}

Keep everything from the previous summary that still holds and add the new progress, decisions \
and context. Move finished items from In Progress to Done and rewrite Next Steps for where the \
work now stands; drop items that no longer matter. Keep exact file paths, function names and \
error messages."""

TURN_PREFIX = """The conversation above is the start of a single turn that was too long to keep \
whole; the rest of the turn is kept word for word after this summary. Summarize the start so \
the rest can be understood, with these headings:

## Original Request
What the user asked for in this turn.

## Early Progress
- What was done and found before the kept part

## Context for Suffix
- What the kept part relies on (files, values, half-finished steps)

Be brief."""

BRANCH = """The conversation above is a branch the user is leaving to try another approach. \
Summarize it so what it taught is not lost, in exactly this Markdown layout:

## Goal
What this branch was trying to achieve.

## Constraints & Preferences
- Requirements and preferences stated on this branch, or (none)

## Progress
### Done
- [x] What was finished
### In Progress
- [ ] What was started but not finished
### Blocked
- What went wrong or stopped the branch, or (none)

## Key Decisions
- **Decision**: the reason for it

## Next Steps
1. What would have come next

Be concise, and keep exact file paths, function names and error messages."""
