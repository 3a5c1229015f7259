"""Re-record the Claude sessions in tests/sessions/ (run it after changing a prompt or a tool).

    .venv/bin/python -m tests.sessions.make_sessions

There is no API key in CI, so "Claude" here is a script of Messages API responses served through
an httpx2 MockTransport as the server-sent events of a streamed call (with thinking blocks and
their signatures), plus answers to count_tokens; everything else is real: the SDK parses the
streams, the loop runs the real tools and records every exchange exactly as it would against the
API.
"""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import anthropic
import httpx2

from agent.brains.anthropic import AnthropicBrain
from agent.brains.sse import render_sse
from agent.compaction import compaction_prompt
from agent.session import Limits, make_agent, start
from tools.domain.config import CompactionConfig, Config, ServerConfig

HERE = Path(__file__).parent
MODEL = "claude-sonnet-4-6"


def todo(i: str, content: str, status: str, priority: str = "medium") -> dict[str, str]:
    return {"id": i, "content": content, "status": status, "priority": priority}


class Script:
    """Builds Messages API responses with stable ids and token counts."""

    def __init__(self, name: str) -> None:
        self.name, self.n = name, 0
        self.responses: list[dict[str, Any]] = []
        self._next = 0

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        """The next response to the request `body` (a fixed script: the next one written)."""
        self._next += 1
        return self.responses[self._next - 1]

    def turn(self, *blocks: dict[str, Any], stop: str = "tool_use", tokens: int = 1200) -> None:
        self.n += 1
        content: list[dict[str, Any]] = []
        for i, block in enumerate(blocks):
            if "thinking" in block:
                content.append(
                    {
                        "type": "thinking",
                        "thinking": block["thinking"],
                        "signature": f"sig_{self.name}_{self.n:02d}_{i}",
                    }
                )
            elif "redacted" in block:
                content.append({"type": "redacted_thinking", "data": block["redacted"]})
            elif "tool" in block:
                content.append(
                    {
                        "type": "tool_use",
                        "id": f"toolu_{self.name}_{self.n:02d}_{i}",
                        "name": block["tool"],
                        "input": block["input"],
                    }
                )
            else:
                content.append({"type": "text", "text": block["text"]})
        thought = sum(len(b.get("thinking", "")) // 4 for b in content)
        self.responses.append(
            {
                "id": f"msg_{self.name}_{self.n:02d}",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": tokens,
                    "output_tokens": 60 + thought,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": tokens // 2,
                    "output_tokens_details": {"thinking_tokens": thought},
                },
            }
        )


def think(text: str) -> dict[str, Any]:
    return {"thinking": text}


def say(text: str) -> dict[str, Any]:
    return {"text": text}


def call(tool: str, **inp: Any) -> dict[str, Any]:
    return {"tool": tool, "input": copy.deepcopy(inp)}  # the script edits its plan afterwards


def todo_campaign() -> Script:
    """A planning session: todos walked pending -> in_progress -> completed, several tool calls
    in one turn, an invalid input answered with is_error, and a compaction."""
    s = Script("todos")
    plan = [
        todo("kill", "Kill leftover servers", "pending", "high"),
        todo("base", "Start and sweep the baseline", "pending", "high"),
        todo("report", "Write the recommendation", "pending", "low"),
    ]
    s.turn(
        think("The goal is to beat the baseline. Leftover servers first, or the port is taken."),
        say("I will write the plan first."),
        call("todowrite", todos=plan),
    )
    plan[0]["status"] = "in_progress"
    s.turn(
        think("The plan is stored. Mark the first item and read the list back to check it."),
        say("Starting with the leftovers."),
        call("todowrite", todos=plan),
        call("todoread"),
    )
    s.turn(say("Marking it done."), call("todowrite", todos=[{"id": "kill", "content": "x"}]))
    plan[0]["status"], plan[1]["status"] = "completed", "in_progress"
    s.turn(
        think("The error says status is required for each item: send the whole list again."),
        say("Fixed the call: status is required."),
        call("todowrite", todos=plan),
    )
    s.turn(call("todoread"), tokens=9000)  # a large prompt: compaction runs before the next call
    s.turn(say("After compaction the list is still here."), call("todoread"))
    plan[1]["status"], plan[2]["status"] = "completed", "in_progress"
    s.turn(call("todowrite", todos=plan))
    plan[2]["status"] = "completed"
    s.turn(say("Everything is done."), call("todowrite", todos=plan))
    s.turn(say("Conclusion: the plan is complete."), stop="end_turn")
    return s


def recovery_campaign() -> Script:
    """Odd turns a real model produces: pause_turn, max_tokens, an unknown tool, a cancelled
    item, and several tool calls at once; also compacts."""
    s = Script("recovery")
    plan = [
        todo("a", "Screen candidates", "in_progress", "high"),
        todo("b", "Try EAGLE-3 at C=1", "pending"),
        todo("c", "Compare against the baseline", "pending"),
    ]
    s.turn(say("Plan."), call("todowrite", todos=plan))
    s.turn(
        think("Order of experiments: the baseline first, then EAGLE-3 at one stream."),
        {"redacted": "ENCRYPTED-THINKING-0001"},
        say("Thinking about the order of experiments..."),
        stop="pause_turn",
    )
    s.turn(call("read_everything", path="/"), call("todoread"))
    s.turn(say("That tool does not exist; I have todoread. Let me be brief."), stop="max_tokens")
    plan[0]["status"], plan[1]["status"] = "completed", "in_progress"
    s.turn(call("todowrite", todos=plan), call("todoread"), call("todoread"), tokens=9000)
    plan[1]["status"], plan[2]["status"] = "cancelled", "in_progress"
    plan[1]["content"] = "Try EAGLE-3 at C=1 (cancelled: the supervisor asked to skip it)"
    s.turn(call("todowrite", todos=plan))
    s.turn(call("todowrite", todos=[dict(t, status="in_progress") for t in plan]))
    plan[2]["status"] = "completed"
    s.turn(call("todowrite", todos=plan))
    s.turn(say("Done: nothing beat the baseline beyond the noise floor."), stop="end_turn")
    return s


def pipeline_campaign() -> Script:
    """A short drafter pipeline as long jobs (docs/pipeline.md): each stage started with
    start_job, waited for, looked at with job_status; the data check refuses the defective data,
    the fixed script is copied over with put_file and the stage rerun; the todo list is the
    pipeline's state. Recorded against the real lab at a fast time scale."""
    s = Script("pipeline")
    names = ["datagen", "check", "extract", "vocab", "train", "convert"]
    plan = [todo(n, f"pipeline {n}", "pending", "high") for n in names]
    plan.append(todo("serve", "serve the trained drafter against the baseline", "pending"))
    plan[0]["status"] = "in_progress"
    s.turn(
        think("A pipeline first: six stages, each a long job. The todo list keeps its state."),
        say("Plan: the stages in order, the data check before the expensive ones."),
        call("todowrite", todos=plan),
        call("start_job", name="datagen", command="bash scripts/datagen.sh"),
    )
    s.turn(say("Waiting by its ETA before looking again."), call("bash", command="sleep 2"))
    s.turn(call("job_status", name="datagen"))
    plan[0]["status"], plan[1]["status"] = "completed", "in_progress"
    s.turn(
        call("todowrite", todos=plan),
        call("start_job", name="check", command="bash scripts/check.sh"),
        call("bash", command="sleep 2"),
    )
    s.turn(call("job_status", name="check"))
    fix = todo("fix", "fix: copy the fixed datagen.sh, regenerate, check again", "in_progress")
    plan[1]["status"] = "pending"
    plan.insert(2, fix)
    s.turn(
        think("The check refused the data: reasoning not closed by </think>. Fix, regenerate."),
        say("The data is malformed; copying the fixed script and regenerating before training."),
        call("todowrite", todos=plan),
        call("put_file", local_path="FIXES/datagen.sh", remote_path="scripts/datagen.sh"),
    )
    s.turn(
        call("start_job", name="datagen-2", command="bash scripts/datagen.sh"),
        call("bash", command="sleep 2"),
    )
    s.turn(call("job_status", name="datagen-2"))
    fix["status"], plan[1]["status"] = "completed", "in_progress"
    s.turn(
        call("todowrite", todos=plan),
        call("start_job", name="check-2", command="bash scripts/check.sh"),
        call("bash", command="sleep 2"),
    )
    s.turn(call("job_status", name="check-2"))
    for i, name in enumerate(names[2:], start=3):
        plan[i - 1]["status"], plan[i]["status"] = "completed", "in_progress"
        s.turn(
            call("todowrite", todos=plan),
            call("start_job", name=name, command=f"bash scripts/{name}.sh"),
            call("bash", command="sleep 2"),
        )
        s.turn(call("job_status", name=name))
    plan[-2]["status"], plan[-1]["status"] = "completed", "cancelled"
    plan[-1]["content"] += " (cancelled: this session records the pipeline only)"
    s.turn(say("Pipeline done: drafter/ is converted."), call("todowrite", todos=plan))
    s.turn(say("Conclusion: the drafter is trained and converted."), stop="end_turn")
    return s


class PlanFollower(Script):
    """A model that consults `plan` and does what it says (issue 26.6), its turns written as the
    run goes from the plan's answers in each request, so the recording holds whatever the lab
    measured. It keeps the plan's key figures (best, gain, noise floor, launches) in its todo
    list, and departs from the advice once, as the system prompt asks: before it concludes, it
    measures the baseline again on a fresh launch (drift since the first sweep would bias the
    gain); then it asks again and follows the plan to its conclusion."""

    def __init__(self) -> None:
        super().__init__("plan")
        self.plan = [
            todo("plan", "Ask the planner, do its experiment; again until it concludes", "pending"),
            todo("figures", "Key figures: none yet", "pending", "high"),
            todo("rebase", "The baseline again on a fresh launch, then conclude", "pending"),
            todo("report", "Recommend what the planner concluded", "pending", "low"),
        ]
        self.phase = "start"
        self.written: list[dict[str, str]] = []  # the list as last sent with todowrite
        self.baseline: list[dict[str, Any]] = []  # the plan's calls that launched and swept it

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        answers = plan_answers(body["messages"])
        if self.phase == "start":
            self.plan[0]["status"] = "in_progress"
            self.turn(
                think("The planner reads this run's measurements: ask it before each step."),
                say("Plan: follow the autopilot's planner step by step, checking each answer."),
                self.write(),
                call("plan"),
            )
            self.phase = "follow"
        elif self.phase == "rebase-sweep":
            self.turn(
                say("Sweeping the fresh baseline at every level, as its first sweep was."),
                *(
                    call(c["tool"], **dict(c["input"], label="revalidate-baseline"))
                    for c in self.baseline
                    if c["tool"] == "run_benchmark"
                ),
            )
            self.phase = "ask"
        elif self.phase == "closing":
            for t in self.plan:
                t["status"] = "completed"
            self.turn(
                say("Conclusion: as the planner concluded; recommendation.json has the figures."),
                self.write(),
            )
            self.phase = "done"
        elif self.phase == "done":
            self.turn(say("Done."), stop="end_turn")
        elif not answers:  # the results of a step: ask again
            self.turn(say("Asking the planner for the next step."), call("plan"))
            self.phase = "follow"
        else:
            self.follow(answers[-1])
        return self.responses[-1]

    def write(self) -> dict[str, Any]:
        self.written = copy.deepcopy(self.plan)
        return call("todowrite", todos=self.plan)

    def follow(self, text: str) -> None:
        head, raw = text.split("\ncalls: ", 1)
        calls = json.loads(raw)
        if not self.baseline:
            self.baseline = calls  # L01 (launch), then its sweep: kept to repeat them
        elif len(self.baseline) == 1:
            self.baseline += calls
        standing = next(line for line in head.splitlines() if line.startswith("Standing: "))
        self.plan[1]["content"] = "Key figures: " + standing[len("Standing: ") :]
        if head.startswith("Next: conclude.") and self.plan[2]["status"] == "pending":
            self.plan[2]["status"] = "in_progress"
            self.plan[0]["status"] = "pending"
            self.turn(
                think(
                    "The planner concludes, but the baseline was last swept at the start: "
                    "the machine may have drifted since. Measure it again on a fresh launch."
                ),
                say("Before concluding: the baseline again, on a fresh launch, for drift."),
                self.write(),
                call(self.baseline[0]["tool"], **self.baseline[0]["input"]),
            )
            self.phase = "rebase-sweep"
            return
        if self.plan[2]["status"] == "in_progress":  # the baseline measured again: back to it
            self.plan[2]["status"], self.plan[0]["status"] = "completed", "in_progress"
        if head.startswith("Next: conclude."):
            self.plan[0]["status"], self.plan[3]["status"] = "completed", "in_progress"
            self.turn(
                think("The planner concludes with the fresh baseline counted: recommend it."),
                say(head.splitlines()[0]),
                self.write(),
                *(call(c["tool"], **c["input"]) for c in calls),
            )
            self.phase = "closing"
            return
        changed = self.plan != self.written
        self.turn(
            think("Following the planner's advice: " + head[len("Next: ") :][:160]),
            *([self.write()] if changed else []),
            *(call(c["tool"], **c["input"]) for c in calls),
        )


def plan_answers(messages: list[dict[str, Any]]) -> list[str]:
    """The texts of the `plan` results in the last user message of a request."""
    if len(messages) < 2 or messages[-1]["role"] != "user":
        return []
    names = {b["id"]: b["name"] for b in messages[-2]["content"] if b.get("type") == "tool_use"}
    out = []
    for b in messages[-1]["content"]:
        if b.get("type") == "tool_result" and names.get(b["tool_use_id"]) == "plan":
            content = b.get("content")
            if isinstance(content, list):
                content = "".join(c.get("text", "") for c in content)
            out.append(str(content))
    return out


def summary(name: str, n: int) -> dict[str, Any]:
    text = (
        f"## Goal\nbeat baseline\n## Findings\nsummary {n} of session {name}: the todo list "
        "holds the plan; nothing measured yet"
    )
    return {
        "id": f"msg_{name}_summary_{n}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 9000,
            "output_tokens": 80,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


COUNTED = 8500  # the scripted count_tokens answer: above the sessions' 8000-token threshold


def answer(body: dict[str, Any], message: dict[str, Any]) -> httpx2.Response:
    """A streamed call gets the message as server-sent events, a plain one as JSON."""
    if body.get("stream"):
        sse = render_sse(message)
        return httpx2.Response(200, content=sse, headers={"content-type": "text/event-stream"})
    return httpx2.Response(200, json=message)


def session_config() -> Config:
    return Config(
        server=ServerConfig(engine="sim", command="true", port=30000),
        compaction=CompactionConfig(threshold_tokens=8000, keep_turns=2, keep_tool_tokens=50),
    )


async def record(
    script: Script,
    runs_dir: Path,
    max_steps: int = 40,
    usage_from_size: bool = False,
    config: Config | None = None,
) -> Path:
    summaries = 0

    def handler(request: httpx2.Request) -> httpx2.Response:
        nonlocal summaries
        body = json.loads(request.content)
        if request.url.path.endswith("/count_tokens"):  # after a prune
            counted = len(request.content) // 4 if usage_from_size else COUNTED
            return httpx2.Response(200, json={"input_tokens": counted})
        last = body["messages"][-1]["content"][-1]
        if last.get("type") == "text" and last["text"] == compaction_prompt():
            summaries += 1  # "Claude" answers a compaction request with a summary
            return answer(body, summary(script.name, summaries))
        response = script.respond(body)
        if usage_from_size:  # a prompt's tokens grow with the conversation, as they would
            response["usage"]["input_tokens"] = len(request.content) // 4
        return answer(body, response)

    client = anthropic.AsyncAnthropic(
        api_key="recording",
        base_url="http://recording.invalid",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    config = config or session_config()
    run = start(
        "beat baseline",
        config,
        MODEL,
        runs_dir,
        script.name,
        Limits(max_steps=max_steps, max_usd=1e6),
    )
    agent = make_agent(run, AnthropicBrain(MODEL, client=client), config)
    await agent.run_loop()
    run.close()
    return run.events_path


def record_pipeline() -> None:
    """The pipeline session (`python -m tests.sessions.make_sessions pipeline`: it alone), against
    the eagle3-pipeline lab (with the data defect) made in a temporary folder."""
    from tools.domain.config import load_config
    from tools.servers.pipeline_lab import setup

    with tempfile.TemporaryDirectory() as tmp:
        lab = setup(Path(tmp) / "lab", defect=True, scale=200000)
        script = pipeline_campaign()
        for response in script.responses:
            for block in response["content"]:
                if block.get("name") == "put_file":
                    block["input"]["local_path"] = str(lab.folder / "fixes" / "datagen.sh")
        path = asyncio.run(record(script, Path(tmp), config=load_config(lab.config)))
        shutil.copy(path, HERE / "pipeline.jsonl")
        print(f"recorded {HERE / 'pipeline.jsonl'}")


def record_plan() -> None:
    """The plan-following session (`python -m tests.sessions.make_sessions plan`: it alone),
    against the built-in lab, run for real (the simulator as real servers), about 7 minutes."""
    from tools.domain.config import lab_config

    with tempfile.TemporaryDirectory() as tmp:
        config = lab_config()
        path = asyncio.run(record(PlanFollower(), Path(tmp), max_steps=300, config=config))
        out = HERE / "plan" / "lab.jsonl"  # apart from the sessions test_replay.py globs
        out.parent.mkdir(exist_ok=True)
        shutil.copy(path, out)
        print(f"recorded {out}")


def main() -> None:
    if sys.argv[1:] == ["plan"]:
        record_plan()
        return
    if sys.argv[1:] != ["pipeline"]:
        with tempfile.TemporaryDirectory() as tmp:
            for script in (todo_campaign(), recovery_campaign()):
                path = asyncio.run(record(script, Path(tmp)))
                shutil.copy(path, HERE / f"{script.name}.jsonl")
                print(f"recorded {HERE / f'{script.name}.jsonl'}")
    record_pipeline()
    if sys.argv[1:] != ["pipeline"]:
        record_plan()


if __name__ == "__main__":
    main()
