"""`make demo`: a small scripted editor drives `pi-lsp serve` over stdio on the example workspace.

It works on a copy of examples/workspace, so the example itself never changes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

HERE = Path(__file__).resolve().parent
DEAD_END = "2879d399"  # tip of branch A, where the ORM rewrite died
QUESTION = "e1afef94"  # the question both branches answer


def step(title: str) -> None:
    print(f"\n\033[1m== {title}\033[0m")


def indent(text: str, limit: int = 1400) -> str:
    shown = text if len(text) <= limit else text[:limit] + "\n…"
    return textwrap.indent(shown, "   ")


class Demo:
    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.client = LanguageClient("pi-lsp-demo", "0.1")
        self.jobs: dict[str, asyncio.Future[Any]] = {}
        self.turn_done: asyncio.Event = asyncio.Event()
        # pygls registers plain functions only, not bound methods.
        self.client.feature("pi/jobDone")(lambda params: self.on_job_done(params))
        self.client.feature("pi/turn")(lambda params: self.on_turn(params))
        self.client.feature("window/showMessageRequest")(lambda params: self.on_approval(params))
        for quiet in ("pi/sessionChanged", "pi/sessionsChanged"):
            self.client.feature(quiet)(lambda _params: None)

    def on_job_done(self, params: Any) -> None:
        future = self.jobs.get(params.jobId)
        if future is not None and not future.done():
            future.set_result(params)

    def on_turn(self, params: Any) -> None:
        event = params.event
        if event.type == "message_update":
            for delta in event.deltas:
                if delta.type == "text_delta":
                    print(delta.delta, end="", flush=True)
        elif event.type == "tool_execution_start":
            print(f"\n   → {event.toolName}", flush=True)
        elif event.type in ("agent_end", "error"):
            if event.type == "error":
                print(f"\n   error: {event.message}")
            self.turn_done.set()

    def on_approval(self, params: types.ShowMessageRequestParams) -> types.MessageActionItem:
        print(f"\n   (approval asked: {params.message} — the demo allows it)")
        return types.MessageActionItem("Allow")

    async def run(self, name: str, **args: Any) -> Any:
        params = types.ExecuteCommandParams(command=name, arguments=[args])
        return await self.client.workspace_execute_command_async(params)

    async def job(self, name: str, **args: Any) -> Any:
        started = await self.run(name, **args)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.jobs[started["jobId"]] = future
        return await asyncio.wait_for(future, 60)

    async def start(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        await self.client.start_io(sys.executable, "-P", "-m", "pi_lsp.cli", "serve", env=env)
        self.client.initialize(types.InitializeParams(
            capabilities=types.ClientCapabilities(
                window=types.WindowClientCapabilities(work_done_progress=False)),
            workspace_folders=[types.WorkspaceFolder(self.workspace.as_uri(), "shop-api")],
            initialization_options={"toolApproval": "ask"},
        ))
        self.client.initialized(types.InitializedParams())

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()

    async def tour(self) -> None:
        step("Sessions of the workspace (pi.listSessions)")
        sessions = (await self.run("pi.listSessions"))["sessions"]
        for s in sessions:
            print(f"   {s['name']} — {s['entryCount']} entries, first: {s['firstMessage'][:60]}…")
        uri = sessions[0]["uri"]

        step("The tree (pi.getTree): two branches from one question, labels, the leaf")
        tree = await self.run("pi.getTree", uri=uri)
        for node in tree["nodes"]:
            mark = "*" if node["onPath"] else " "
            label = f"  [{node['label']}]" if node["label"] else ""
            leaf = "  ← leaf" if node["id"] == tree["leafId"] else ""
            print(f"   {mark} {node['id']} {node['role'] or node['type']:<22} "
                  f"{node['preview'][:50]}{label}{leaf}")

        for title, leaf in (("branch B's tip (after its compaction)", tree["leafId"]),
                            ("the dead end's tip", DEAD_END)):
            step(f"What the model sees at {title} (pi.previewContext)")
            preview = await self.run("pi.previewContext", uri=uri, leafId=leaf)
            print(f"   {preview['model']}, thinking {preview['thinkingLevel']}: "
                  f"{preview['totalTokens']:,} of {preview['contextWindow']:,} tokens")
            for m in preview["messages"]:
                print(f"   {m['entryId']}  {m['role']:<18} {m['tokens']:>5} tokens")

        step("The two tips compared (pi.diffContext)")
        diff = await self.run("pi.diffContext", uri=uri, fromLeafId=DEAD_END,
                              toLeafId=tree["leafId"])
        print(f"   only on the dead end: {len(diff['onlyFrom'])} entries "
              f"({diff['fromTokens']:,} tokens); only on B: {len(diff['onlyTo'])} entries "
              f"({diff['toTokens']:,} tokens)")

        step("A compaction plan for branch B (pi.compact dryRun)")
        dry = await self.run("pi.compact", uri=uri, dryRun=True)
        plan = dry["plan"]
        print(f"   none: compact would refuse: {dry['reason']}" if plan is None else
              f"   keep from {plan['firstKeptEntryId']}, summarize "
              f"{plan['messagesToSummarize']} messages, {plan['tokensBefore']:,} tokens before")

        step("A label on the question (pi.label)")
        await self.run("pi.label", uri=uri, targetId=QUESTION, label="ask-again-here")
        print("   labelled", QUESTION)

        step("Branch back to the question with a summary of where we were "
             "(pi.branchWithSummary)")
        done = await self.job("pi.branchWithSummary", uri=uri, targetId=QUESTION)
        result = done.result
        print(f"   new leaf {result.leafId}; the question comes back for editing:")
        print(indent(result.editorText))
        print("   the summary left under the new leaf:")
        print(indent(result.summary, 900))

        step("The context there: the left branch is its own block (pi.previewContext markdown)")
        preview = await self.run("pi.previewContext", uri=uri)
        print(indent(preview["markdown"][-900:]))

        step("Fork the session at the question (pi.fork)")
        fork = await self.run("pi.fork", uri=uri, leafId=QUESTION)
        print("   new session:", Path(fork["uri"]).name)

        step("A live turn (pi.prompt)")
        if not os.environ.get("ANTHROPIC_API_KEY"):
            print("   no ANTHROPIC_API_KEY set, so no model is called; summaries above came "
                  "from the offline extractive summarizer")
            return
        await self.run("pi.prompt", uri=uri, text="In one sentence: what is the state of "
                       "the order-listing fix?")
        print("   ", end="")
        await asyncio.wait_for(self.turn_done.wait(), 120)
        print()


async def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="pi-lsp-demo-"))
    workspace = scratch / "shop-api"
    shutil.copytree(HERE / "workspace", workspace)
    os.environ.setdefault("PI_CODING_AGENT_DIR", str(scratch / "agent"))
    os.environ["XDG_STATE_HOME"] = str(scratch / "state")  # the tour's file snapshots go too
    demo = Demo(workspace)
    try:
        await demo.start()
        await demo.tour()
    finally:
        await demo.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
