"""End-to-end test of `aptix::mcp` with the official MCP Python SDK (PyPI `mcp`).

Driven by tests/mcp/mcp_python.rs, which serves the example tools plus `sleep_ms`
(a slow tool that records, in files under --record-dir, when it starts and
whether it finished or saw its cancellation) and runs this script once per
transport:

    e2e.py --snapshots tests/catalog/snapshots --record-dir DIR --url http://127.0.0.1:PORT/mcp
    e2e.py --snapshots tests/catalog/snapshots --record-dir DIR \
        [--server-env KEY=VALUE ...] --stdio -- COMMAND [ARG ...]

For each connection mode (`legacy`: the `initialize` handshake, protocol
2025-11-25, where approvals are asked with `elicitation/create` requests;
`auto`: the `server/discover` probe, protocol 2026-07-28, where they are asked
with `input_required` results) it connects afresh (a new server process for
stdio) and checks:

* the handshake: the negotiated protocol era, the server's name;
* `tools/list`: exactly the expected tools, sorted by name, the client tool
  `get_location` absent; each example tool's `inputSchema` equal to the
  MCP-dialect insta snapshot (tests/catalog/snapshots/catalog__schemas__NAME@mcp.snap), its
  `outputSchema` equal to the `output` of the contract snapshot
  (NAME@contract.snap), except that the listing may add
  `"$schema": "https://json-schema.org/draft/2020-12/schema"` at the root of
  either (nothing else); its description the snapshot's, which carries a
  non-empty "\\n\\nUsage: ...";
* `tools/call` of every listed example tool: the greeting, the time (and no
  progress notifications: the tool reports none), `send_email` approved through the client's
  elicitation callback, then declined, cancelled and accepted with
  `approve: false` (each `denied`); the client itself validates every
  successful result's `structuredContent` against the listed `outputSchema`;
* bad arguments (missing, wrong type, out of range, bad pattern): an `isError`
  result whose message names the field, and no approval asked;
* an unknown tool, and the unlisted client tool: a JSON-RPC error -32602;
* cancellation: a `sleep_ms` call cancelled by the caller (an anyio cancel
  scope) is seen as cancelled by the tool on the server, and the session
  still works afterwards. The client sends `notifications/cancelled`, except
  on Streamable HTTP at 2026-07-28, where it aborts the request's POST.

Every mismatch is reported; the exit status is 1 if there was any, 2 for bad
usage. Nothing is printed on stdout but progress lines.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

# The tools the e2e server lists, in the order it must list them (by name).
# `get_location` is a client tool: in the catalog, never listed.
EXPECTED_TOOLS = ["agent_hello_world", "get_current_time", "send_email", "sleep_ms"]
# Listed tools that have insta snapshots (the example tools).
SNAPSHOTTED = ["agent_hello_world", "get_current_time", "send_email"]
UNLISTED_CLIENT_TOOL = "get_location"
INVALID_PARAMS = -32602
# The dialect the listing may name at the root of a listed schema.
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

# Generous bounds for a busy 2-core machine; hang detectors, not timings.
CALL_TIMEOUT_S = 60.0
RECORD_TIMEOUT_S = 20.0
MODE_TIMEOUT_S = 180.0


class Failed(Exception):
    """A check that makes the rest of the mode meaningless."""


@dataclass
class Checks:
    """Collects mismatches instead of stopping at the first one."""

    failures: list[str] = field(default_factory=list)
    passed: int = 0
    where: str = ""

    def check(self, condition: bool, message: str) -> bool:
        if condition:
            self.passed += 1
        else:
            self.failures.append(f"[{self.where}] {message}")
        return condition

    def equal(self, actual: Any, expected: Any, what: str) -> bool:
        return self.check(
            actual == expected,
            f"{what}:\n  expected {json.dumps(expected, sort_keys=True, default=str)}\n  got      {json.dumps(actual, sort_keys=True, default=str)}",
        )


def log(message: str) -> None:
    print(f"e2e.py: {message}", flush=True)


# ---------------------------------------------------------------------------
# Snapshots


def read_snapshot(path: Path) -> Any:
    """The JSON body of an insta snapshot: a `---` delimited YAML header, then JSON."""
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        raise Failed(f"{path}: not an insta snapshot (no leading `---` header)")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise Failed(f"{path}: the snapshot header is not closed by `---`")
    try:
        return json.loads(text[end + len("\n---\n") :])
    except json.JSONDecodeError as error:
        raise Failed(f"{path}: the snapshot body is not JSON: {error}") from error


# ---------------------------------------------------------------------------
# The person at the client, answering approval forms


@dataclass
class Person:
    """What the elicitation callback answers, and what it was asked."""

    answer: types.ElicitResult = field(default_factory=lambda: types.ElicitResult(action="decline"))
    asked: list[types.ElicitRequestParams] = field(default_factory=list)

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.asked.append(params)
        return self.answer


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def dump(result: types.CallToolResult) -> str:
    return result.model_dump_json(by_alias=True, exclude_none=True)


# ---------------------------------------------------------------------------
# The checks of one connection


@dataclass
class Run:
    c: Checks
    client: Client
    person: Person
    mode: str
    snapshots: Path
    record_dir: Path

    async def call(self, name: str, arguments: dict[str, Any], **kwargs: Any) -> types.CallToolResult:
        with anyio.fail_after(CALL_TIMEOUT_S):
            return await self.client.call_tool(name, arguments, **kwargs)

    async def handshake(self) -> None:
        version = self.client.protocol_version
        log(f"[{self.mode}] negotiated protocol {version}")
        if self.mode == "legacy":
            self.c.check(version in HANDSHAKE_PROTOCOL_VERSIONS, f"legacy mode negotiated {version!r}")
        else:
            self.c.check(
                version in MODERN_PROTOCOL_VERSIONS,
                f"auto mode negotiated {version!r}, not a modern version {MODERN_PROTOCOL_VERSIONS}: "
                "the server did not answer server/discover",
            )
        info = self.client.server_info
        if self.mode == "legacy" or info is not None:
            self.c.check(info is not None and info.name == "aptix", f"server info: {info!r}")
        self.c.check(
            self.client.server_capabilities.tools is not None, "the server does not declare the tools capability"
        )

    async def list_tools(self) -> dict[str, types.Tool]:
        with anyio.fail_after(CALL_TIMEOUT_S):
            listing = await self.client.list_tools(cache_mode="bypass")
        self.c.check(listing.next_cursor is None, f"tools/list is paginated: nextCursor {listing.next_cursor!r}")
        names = [tool.name for tool in listing.tools]
        self.c.equal(names, EXPECTED_TOOLS, "tools/list names, in order")
        self.c.check(UNLISTED_CLIENT_TOOL not in names, f"the client tool {UNLISTED_CLIENT_TOOL} is listed")
        tools = {tool.name: tool for tool in listing.tools}
        for name in SNAPSHOTTED:
            tool = tools.get(name)
            if tool is None:
                continue
            snapshot = read_snapshot(self.snapshots / f"catalog__schemas__{name}@mcp.snap")
            self.c.equal(snapshot.get("name"), name, f"{name}: the snapshot's name")
            self.schema_matches(tool.input_schema, snapshot["inputSchema"], f"{name}: inputSchema vs catalog__schemas__{name}@mcp.snap")
            # The snapshot is the tool as sent: its description, then its usage.
            self.c.equal(tool.description, snapshot["description"], f"{name}: description vs the @mcp snapshot")
            self.c.check(
                "\n\nUsage: " in (tool.description or "") and not (tool.description or "").endswith("Usage: "),
                f"{name}: description {tool.description!r} carries no non-empty `\\n\\nUsage: ...`",
            )
            contract = read_snapshot(self.snapshots / f"catalog__schemas__{name}@contract.snap")
            self.schema_matches(
                tool.output_schema, contract["output"], f"{name}: outputSchema vs catalog__schemas__{name}@contract.snap's output"
            )
        sleep = tools.get("sleep_ms")
        if sleep is not None:
            self.c.equal(sorted(sleep.input_schema.get("properties", {})), ["label", "ms"], "sleep_ms: properties")
        return tools

    def schema_matches(self, listed: dict[str, Any] | None, snapshot: dict[str, Any], what: str) -> None:
        """The listed schema is the snapshot, exactly, but for one addition the
        listing may make: `"$schema": DRAFT_2020_12` at the root (and nowhere
        else) when the snapshot has no `$schema` (aptix-core/src/mcp/list.rs,
        `declare_dialect`)."""
        if listed is not None and "$schema" in listed and "$schema" not in snapshot:
            self.c.equal(listed["$schema"], DRAFT_2020_12, f"{what}: the `$schema` the listing adds")
            listed = {key: value for key, value in listed.items() if key != "$schema"}
        self.c.equal(listed, snapshot, what)

    async def hello_world(self) -> None:
        result = await self.call("agent_hello_world", {"name": "Ada"})
        self.c.check(not result.is_error, f"agent_hello_world failed: {dump(result)}")
        structured = result.structured_content or {}
        self.c.equal(structured.get("message"), "Hello, Ada! Welcome.", "agent_hello_world: message")
        try:
            self.c.equal(json.loads(text_of(result)), structured, "agent_hello_world: text vs structuredContent")
        except json.JSONDecodeError:
            self.c.check(False, f"agent_hello_world: the text is not JSON: {text_of(result)!r}")

    async def current_time(self) -> None:
        progress: list[tuple[float, float | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total))

        for offset, expected in [(None, "+00:00"), (60, "+01:00"), (-330, "-05:30")]:
            arguments = {} if offset is None else {"utc_offset_minutes": offset}
            before = dt.datetime.now(dt.timezone.utc)
            result = await self.call("get_current_time", arguments, progress_callback=on_progress)
            after = dt.datetime.now(dt.timezone.utc)
            if not self.c.check(not result.is_error, f"get_current_time {arguments}: {dump(result)}"):
                continue
            structured = result.structured_content or {}
            self.c.equal(structured.get("utc_offset"), expected, f"get_current_time {arguments}: utc_offset")
            try:
                when = dt.datetime.fromisoformat(str(structured.get("rfc3339")))
            except ValueError:
                self.c.check(False, f"get_current_time: rfc3339 {structured.get('rfc3339')!r} does not parse")
                continue
            slack = dt.timedelta(seconds=5)
            self.c.check(
                before - slack <= when <= after + slack,
                f"get_current_time: {when.isoformat()} is not between {before.isoformat()} and {after.isoformat()}",
            )
            self.c.equal(
                when.utcoffset(), dt.timedelta(minutes=offset or 0), f"get_current_time {arguments}: the offset used"
            )
            unix_ms = structured.get("unix_ms")
            self.c.check(
                isinstance(unix_ms, int) and abs(unix_ms - when.timestamp() * 1000) < 1000,
                f"get_current_time: unix_ms {unix_ms!r} disagrees with {when.isoformat()}",
            )
        # A tool that reports no progress gets no notifications.
        self.c.check(
            progress == [],
            f"get_current_time: progress notifications from a tool that reports none: {progress}",
        )

    async def send_email(self) -> None:
        arguments = {"to": "ada@example.com", "subject": "Hi", "body": "Hello"}
        # Approved: the person accepts with approve=true.
        self.person.asked.clear()
        self.person.answer = types.ElicitResult(action="accept", content={"approve": True})
        result = await self.call("send_email", arguments)
        self.c.check(not result.is_error, f"send_email approved: {dump(result)}")
        message_id = (result.structured_content or {}).get("message_id")
        self.c.check(
            isinstance(message_id, str) and message_id.startswith("msg-mcp-"),
            f"send_email approved: message_id {message_id!r} is not msg-<an mcp- call id>",
        )
        if self.c.equal(len(self.person.asked), 1, "send_email: approval forms asked"):
            form = self.person.asked[0]
            self.c.check(isinstance(form, types.ElicitRequestFormParams), f"send_email: not a form: {form!r}")
            if isinstance(form, types.ElicitRequestFormParams):
                self.c.check("send_email" in form.message, f"send_email: the form's message {form.message!r}")
                self.c.check(
                    "ada@example.com" in form.message, f"send_email: the form does not show the arguments: {form.message!r}"
                )
                schema = form.requested_schema
                approve = schema.get("properties", {}).get("approve", {})
                self.c.equal(approve.get("type"), "boolean", "send_email: the form's `approve` field type")
        # A second approved call is a new call: a different message id.
        again = await self.call("send_email", arguments)
        other_id = (again.structured_content or {}).get("message_id")
        self.c.check(
            not again.is_error and other_id != message_id,
            f"send_email: two calls got the same message id {message_id!r} (call ids must be fresh)",
        )
        # Declined, cancelled, and accepted with approve=false: denied, nothing sent.
        for answer in [
            types.ElicitResult(action="decline"),
            types.ElicitResult(action="cancel"),
            types.ElicitResult(action="accept", content={"approve": False}),
        ]:
            self.person.asked.clear()
            self.person.answer = answer
            result = await self.call("send_email", arguments)
            what = f"send_email with the answer {answer.model_dump(exclude_none=True)}"
            self.c.check(result.is_error is True, f"{what}: not an error: {dump(result)}")
            self.c.equal((result.structured_content or {}).get("code"), "denied", f"{what}: error code")
            self.c.check("message_id" not in text_of(result), f"{what}: looks sent: {text_of(result)!r}")
            self.c.equal(len(self.person.asked), 1, f"{what}: approval forms asked")

    async def bad_arguments(self) -> None:
        self.person.asked.clear()
        self.person.answer = types.ElicitResult(action="accept", content={"approve": True})
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("agent_hello_world", {}, "name"),
            ("agent_hello_world", {"name": 42}, "name"),
            ("agent_hello_world", {"name": "Ada", "nmae": "Ada"}, "nmae"),
            ("get_current_time", {"utc_offset_minutes": 5000}, "utc_offset_minutes"),
            ("get_current_time", {"utc_offset_minutes": "60"}, "utc_offset_minutes"),
            ("send_email", {"to": "not-an-address", "subject": "Hi", "body": "Hello"}, "to"),
            ("send_email", {"to": "ada@example.com", "body": "Hello"}, "subject"),
        ]
        for name, arguments, field_name in cases:
            result = await self.call(name, arguments)
            what = f"{name} {json.dumps(arguments)}"
            if not self.c.check(result.is_error is True, f"{what}: not an error: {dump(result)}"):
                continue
            structured = result.structured_content or {}
            self.c.equal(structured.get("code"), "invalid_arguments", f"{what}: error code")
            self.c.check(field_name in text_of(result), f"{what}: the message does not name `{field_name}`: {text_of(result)!r}")
        self.c.equal(len(self.person.asked), 0, "approvals asked for invalid send_email arguments")

    async def unknown_tools(self) -> None:
        for name in ["no_such_tool", UNLISTED_CLIENT_TOOL]:
            try:
                result = await self.call(name, {})
            except MCPError as error:
                self.c.equal(error.error.code, INVALID_PARAMS, f"tools/call {name}: JSON-RPC error code")
                self.c.check(name in error.error.message, f"tools/call {name}: the error does not name it: {error.error.message!r}")
            else:
                self.c.check(False, f"tools/call {name}: expected a JSON-RPC error, got the result {dump(result)}")

    def record(self, label: str) -> list[str]:
        path = self.record_dir / label
        return path.read_text(encoding="utf-8").split() if path.exists() else []

    async def wait_for_record(self, label: str, event: str) -> bool:
        deadline = time.monotonic() + RECORD_TIMEOUT_S
        while time.monotonic() < deadline:
            if event in self.record(label):
                return True
            await anyio.sleep(0.02)
        return False

    async def sleep_and_cancel(self) -> None:
        # Not cancelled: the tool sleeps and finishes.
        label = f"{self.mode}-finish-{time.monotonic_ns()}"
        result = await self.call("sleep_ms", {"ms": 20, "label": label})
        self.c.check(not result.is_error, f"sleep_ms 20 ms: {dump(result)}")
        self.c.equal(self.record(label), ["started", "finished"], "sleep_ms 20 ms: the server's record")

        # Cancelled by the caller while the tool sleeps.
        label = f"{self.mode}-cancel-{time.monotonic_ns()}"
        outcome: dict[str, Any] = {}

        async def slow_call(scope: anyio.CancelScope) -> None:
            with scope:
                outcome["result"] = await self.client.call_tool("sleep_ms", {"ms": 30_000, "label": label})

        scope = anyio.CancelScope()
        started = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(slow_call, scope)
            if not self.c.check(await self.wait_for_record(label, "started"), "sleep_ms never started"):
                scope.cancel()
                return
            scope.cancel()
        self.c.check("result" not in outcome, f"the cancelled call returned {outcome.get('result')!r}")
        self.c.check(scope.cancelled_caught, "the cancel scope did not catch the cancellation")
        seen = await self.wait_for_record(label, "cancelled")
        self.c.check(
            seen,
            f"the server's sleep_ms did not see its cancellation within {RECORD_TIMEOUT_S} s "
            f"(record: {self.record(label)})",
        )
        self.c.check("finished" not in self.record(label), f"sleep_ms finished despite the cancellation: {self.record(label)}")
        log(f"[{self.mode}] cancellation seen by the tool after {time.monotonic() - started:.2f} s: {seen}")
        # The session survives the cancellation.
        await self.hello_world()


async def run_mode(c: Checks, args: argparse.Namespace, mode: str) -> None:
    person = Person()
    server: StdioServerParameters | str
    if args.url:
        server = args.url
    else:
        env = dict(item.split("=", 1) for item in args.server_env)
        server = StdioServerParameters(command=args.command[0], args=args.command[1:], env=env)
    started = time.monotonic()
    with anyio.fail_after(MODE_TIMEOUT_S):
        async with Client(server, mode=mode, elicitation_callback=person.elicit) as client:
            run = Run(c, client, person, mode, args.snapshots, args.record_dir)
            steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
                ("handshake", run.handshake),
                ("tools/list", run.list_tools),  # type: ignore[list-item]
                ("agent_hello_world", run.hello_world),
                ("get_current_time", run.current_time),
                ("send_email", run.send_email),
                ("bad arguments", run.bad_arguments),
                ("unknown tools", run.unknown_tools),
                ("cancellation", run.sleep_and_cancel),
            ]
            for step, check in steps:
                c.where = f"{mode}: {step}"
                before = len(c.failures)
                await check()
                log(f"[{mode}] {step}: {'ok' if len(c.failures) == before else 'FAILED'}")
    log(f"[{mode}] done in {time.monotonic() - started:.2f} s")


def describe(error: BaseException) -> str:
    """The traceback of the error itself, out of the task groups' wrappers."""
    while (inner := getattr(error, "exceptions", None)) and len(inner) == 1:
        error = inner[0]
    return "".join(traceback.format_exception(error)).rstrip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--snapshots", type=Path, required=True, help="tests/catalog/snapshots")
    parser.add_argument("--record-dir", type=Path, required=True, help="where sleep_ms records what it saw")
    parser.add_argument("--mode", action="append", choices=["legacy", "auto"], help="default: both")
    parser.add_argument("--server-env", action="append", default=[], help="KEY=VALUE for the stdio server")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="a Streamable HTTP endpoint")
    target.add_argument("--stdio", action="store_true", help="spawn the command after `--`")
    parser.add_argument("command", nargs="*", help="the stdio server command")
    args = parser.parse_args()
    if args.stdio and not args.command:
        parser.error("--stdio needs a server command after `--`")
    if args.url and args.command:
        parser.error("--url takes no server command")
    if any("=" not in item for item in args.server_env):
        parser.error("--server-env takes KEY=VALUE")

    c = Checks()
    for mode in args.mode or ["legacy", "auto"]:
        c.where = f"{mode}: connect"
        try:
            anyio.run(run_mode, c, args, mode)
        except Failed as error:
            c.failures.append(f"[{c.where}] {error}")
        except Exception as error:  # noqa: BLE001 - any error is a failure to report in full
            c.failures.append(f"[{c.where}] unexpected exception:\n{describe(error)}")
    if c.failures:
        print(f"e2e.py: {len(c.failures)} mismatch(es), {c.passed} check(s) passed:", file=sys.stderr)
        for failure in c.failures:
            print(f"- {failure}", file=sys.stderr)
        return 1
    log(f"all {c.passed} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
