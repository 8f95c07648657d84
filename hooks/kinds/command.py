"""``command`` hooks: an executable run for each event, Claude Code style.

Contract:
- ``argv`` is a list run as is (no shell, nothing interpolated); its first element is an absolute
  path. The process gets the event as JSON on stdin, a minimal environment (``PATH``, ``LANG``,
  ``HOME``, the declaration's literal ``env``) and a fixed working directory
  (``settings.HOOK_COMMAND_CWD``).
- Exit 0: stdout is empty or a protocol answer (:mod:`hooks.kinds.protocol`). Exit 2: the call is
  blocked (PreToolUse) or its result withheld (PostToolUse) with stderr as the reason. Any other
  exit, output past ``HOOK_COMMAND_MAX_OUTPUT`` bytes or unreadable output fails (closed unless
  ``on_error: allow``).
- At its timeout, or when the run stops waiting, the process is killed with its whole process
  group (it runs in a session of its own); its group is killed when it exits too, so a script
  cannot leave a background child behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any, Unpack

from django.conf import settings

from hooks.contract import HookContext, HookPoint, HookResult
from hooks.kinds.base import Declared, DeclaredHook
from hooks.kinds.protocol import MAX_REASON, ProtocolError, event_payload, parse_reply, result_from_reply

BLOCK_EXIT_CODE = 2
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


class CommandFailed(RuntimeError):
    """The command did not answer within the protocol (its exit status, its output)."""


def check_argv(argv: Any) -> list[str]:
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
        raise ValueError("argv must be a non-empty list of non-empty strings")
    if any("\x00" in a for a in argv):
        raise ValueError("argv must not contain NUL characters")
    if not os.path.isabs(argv[0]):
        raise ValueError(f"argv[0] must be an absolute path, not {argv[0]!r}")
    if not (os.path.isfile(argv[0]) and os.access(argv[0], os.X_OK)):
        # Checked when declared and again when a run builds its chain (on the worker's machine).
        raise ValueError(f"argv[0] {argv[0]!r} is not an executable file")
    return list(argv)


def check_env(env: Any) -> dict[str, str]:
    if env is None:
        return {}
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and k and "=" not in k and isinstance(v, str) for k, v in env.items()
    ):
        raise ValueError("env must be an object of string values")
    return dict(env)


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, bool]:
    """Read until EOF, keeping at most ``cap`` bytes (the rest is drained, so the writer never
    blocks); the flag says whether the output went past the cap."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await stream.read(65_536)
        if not chunk:
            return (b"", True) if size > cap else (b"".join(chunks), False)
        size += len(chunk)
        if size <= cap:
            chunks.append(chunk)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class CommandHook(DeclaredHook):
    kind = "command"
    timeout = 10.0

    def __init__(
        self,
        *,
        argv: list[str],
        env: dict[str, str] | None = None,
        **declared: Unpack[Declared],
    ) -> None:
        super().__init__(**declared)
        self.argv = check_argv(argv)
        self.env = check_env(env)

    async def execute(self, ctx: HookContext) -> HookResult:
        stdin = event_payload(ctx, hook_name=self.hook_name)
        code, stdout, stderr = await self._run(stdin)
        if code == BLOCK_EXIT_CODE:
            reason = stderr.decode("utf-8", errors="replace").strip()[:MAX_REASON]
            if ctx.hook_point is HookPoint.SESSION_START:
                raise CommandFailed(f"blocked the session: {reason or 'no reason given'}")
            if ctx.hook_point is HookPoint.POST_TOOL_USE:
                why = reason or "no reason given"
                return HookResult(
                    modified_result=f"[The tool's result was withheld by '{self.hook_name}': {why}]",
                    side_effects=[f"result withheld: {why}"],
                )
            return HookResult(allow=False, error=reason or f"Tool call blocked by '{self.hook_name}'.")
        if code != 0:
            # stderr is not repeated: it may hold what the script read, secrets included.
            raise CommandFailed(f"exited with status {code}")
        try:
            reply = parse_reply(stdout)
        except (ProtocolError, UnicodeDecodeError) as exc:
            if ctx.hook_point is HookPoint.SESSION_START and isinstance(exc, ProtocolError):
                # Claude Code adds a SessionStart script's plain output to the context.
                return HookResult(additional_context=stdout.decode().strip()[:20_000])
            raise ProtocolError("the hook's output is not JSON") from None
        return result_from_reply(reply, ctx, hook_name=self.hook_name)

    async def _run(self, stdin: bytes) -> tuple[int, bytes, bytes]:
        cap = int(getattr(settings, "HOOK_COMMAND_MAX_OUTPUT", 1_000_000))
        env = {**BASE_ENV, "HOME": settings.HOOK_COMMAND_CWD, **self.env}
        proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=settings.HOOK_COMMAND_CWD,
            env=env,
            start_new_session=True,  # its own process group, killed as a whole
            close_fds=True,
        )
        try:
            async with asyncio.timeout(self.timeout):
                return await self._talk(proc, stdin, cap)
        except TimeoutError:
            raise CommandFailed(f"timed out after {self.timeout:g} s and was killed") from None
        finally:
            # Always: kills a hung script, its children, and anything it left in the background.
            _kill_group(proc.pid)
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await asyncio.shield(proc.wait())

    async def _talk(self, proc: Any, stdin: bytes, cap: int) -> tuple[int, bytes, bytes]:
        async def feed() -> None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(stdin)
                await proc.stdin.drain()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.close()

        tasks = [
            asyncio.ensure_future(feed()),
            asyncio.ensure_future(_read_capped(proc.stdout, cap)),
            asyncio.ensure_future(_read_capped(proc.stderr, cap)),
        ]
        outputs = asyncio.gather(*tasks)
        try:
            while True:
                # Usually the pipes close when the script exits. A child it left in the
                # background may hold them open: once the script has exited, its group goes.
                done, _ = await asyncio.wait({outputs}, timeout=0.05)
                if done:
                    break
                if proc.returncode is not None:
                    _kill_group(proc.pid)
            _, (stdout, too_long), (stderr, _) = outputs.result()
            code = await proc.wait()
        finally:
            outputs.cancel()
            for task in tasks:
                task.cancel()
        if too_long:
            raise CommandFailed(f"wrote more than {cap} bytes")
        return code, stdout, stderr
