"""``manage.py hooks export|import``: YAML round trips and errors that name the line."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from agents.checks import hook_chain_of
from agents.hook_declarations import HookFileError, hooks_export, hooks_import
from agents.models import HookDeclaration
from tests.personas import make_agent, make_hook, scripted

SCRIPTS = Path(__file__).resolve().parent.parent / "hooks" / "scripts"
SECRET = "whsec-round-trip-secret"


def comparable(chain: dict[str, Any]) -> list[dict[str, Any]]:
    """The effective chain, without what legitimately differs between two copies: the source
    (JSON or row) and the encrypted secret's token (Fernet tokens are salted)."""
    return [{k: v for k, v in i.items() if k not in ("source", "secret_enc")} for i in chain["declared"]]


def busy_agent(personas):
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted(
            {"content": "x"}, hooks=[{"name": "truncate_result", "params": {"max_chars": 500}}]
        ),
    )
    make_hook(
        agent,
        "deny_tools",
        params={"tools": ["oa__a", "oa__b"], "message": "No."},
        priority=15,
        matcher="oa__*",
    )
    make_hook(
        agent,
        "freeze",
        kind="command",
        point="PreToolUse",
        params={"argv": [str(SCRIPTS / "block_payments.sh"), "--reason", 'audit: "Q4"']},
        timeout=2.5,
        on_error="allow",
        matcher="re:oa__purchase_(pay|refund)",
    )
    make_hook(
        agent,
        "policy",
        kind="http",
        point="PostToolUse",
        params={"url": "https://hooks.example/p"},
        secret=SECRET,
    )
    make_hook(
        agent,
        "notes",
        kind="python",
        point="PreToolUse",
        params={"path": "tests.hooks.declared_examples.tag_reference"},
        mode="off",
    )
    return agent


def test_export_then_import_into_another_agent_reproduces_the_effective_chain(personas, tmp_path) -> None:
    source = busy_agent(personas)
    target = make_agent(personas.org, personas.operator, name="Copy")
    make_hook(target, "deny_tools", params={"tools": "everything"})  # replaced by the import
    path = tmp_path / "hooks.yaml"
    call_command("hooks", "export", "--agent", str(source.pk), "--output", str(path))
    text = path.read_text()
    assert SECRET not in text, "exports never carry secrets"

    # The secret is not in the file: the target gets it from the file's 'secret:' line.
    path.write_text(text.replace("- name: policy\n", f"- name: policy\n  secret: {SECRET}\n"))
    out = io.StringIO()
    call_command("hooks", "import", str(path), "--agent", str(target.pk), stdout=out)

    assert "imported 5 hook declaration(s)" in out.getvalue()
    assert comparable(hook_chain_of(target)) == comparable(hook_chain_of(source))
    assert HookDeclaration.objects.get(agent=target, name="policy").secret == SECRET


def test_reimporting_an_agents_own_export_keeps_its_chain_and_its_http_secret(personas) -> None:
    agent = busy_agent(personas)
    before = comparable(hook_chain_of(agent))

    hooks_import(text=hooks_export(agent=agent), filename="same.yaml")

    agent.refresh_from_db()
    assert "hooks" not in agent.model_config_json, "the JSON form became rows"
    assert comparable(hook_chain_of(agent)) == before
    assert HookDeclaration.objects.get(agent=agent, name="policy").secret == SECRET


def test_enforced_hooks_round_trip_by_organisation(personas) -> None:
    make_hook(personas.org, "deny_tools", params={"tools": "oa__danger"}, priority=3)
    agent = make_agent(personas.org, personas.operator)
    before = comparable(hook_chain_of(agent))
    out = io.StringIO()
    call_command("hooks", "export", "--organisation", "Acme", stdout=out)
    HookDeclaration.objects.all().delete()

    hooks_import(text=out.getvalue(), filename="acme.yaml")

    assert comparable(hook_chain_of(agent)) == before
    assert HookDeclaration.objects.get().is_enforced


def problems_of(text: str, **target: Any) -> list[str]:
    with pytest.raises(HookFileError) as caught:
        hooks_import(text=textwrap.dedent(text), filename="bad.yaml", **target)
    return caught.value.problems


def test_a_bad_field_is_named_with_its_line_and_nothing_is_imported(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    make_hook(agent, "deny_tools", params={"tools": "keep"})

    problems = problems_of(
        f"""\
        agent: {agent.pk}
        hooks:
          - name: deny_tools
            params: {{tools: x}}
          - name: freeze
            kind: command
            point: PreToolUse
            priority: high
            params:
              argv: not-a-list
          - name: t
            colour: blue
        """
    )

    assert problems == [
        "bad.yaml:8: hooks[1].priority: must be a whole number",
        "bad.yaml:12: hooks[2].colour: unknown field (fields: name, kind, point, matcher, priority, timeout, "
        "on_error, mode, enabled, params, secret)",
    ]
    assert list(HookDeclaration.objects.values_list("params", flat=True)) == [{"tools": "keep"}]


def test_a_declaration_that_could_not_run_is_named_with_its_line(personas) -> None:
    agent = make_agent(personas.org, personas.operator)

    problems = problems_of(
        """\
        hooks:
          - name: deny_tools
            params: {tools: x}
          - name: freeze
            kind: command
            point: PreToolUse
            params:
              argv: [relative/script.sh]
          - name: no_such_hook
        """,
        agent=agent,
    )

    assert problems[0].startswith(
        "bad.yaml:7: hooks[1].params: hook 'freeze': bad params: argv[0] must be an absolute"
    )
    assert problems[1].startswith("bad.yaml:9: hooks[2].params: unknown hook 'no_such_hook'")
    assert not HookDeclaration.objects.exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hooks:\n  - name: a\n    params: {tools: [x\n", "bad.yaml:4: not valid YAML"),
        ("hooks:\n  - name: a\n    name: b\n", "bad.yaml:3: hooks[0].name: duplicate key"),
        ("hooks: {name: a}\n", "bad.yaml:1: hooks: must be a list of hooks"),
        ("- a\n- b\n", "bad.yaml:1: the file must be a mapping"),
        ("", "bad.yaml:1: the file is empty"),
        ("agent: 99999\nhooks: []\n", "bad.yaml:1: agent: no agent with id 99999"),
        ("hooks: []\n", "name the target"),
        (
            "hooks:\n  - name: p\n    kind: http\n    point: PreToolUse\n    params: {url: 'https://x.example/'}\n",
            "bad.yaml:2: hooks[0]: an http hook needs 'secret:'",
        ),
        ("!!python/object/apply:os.system ['touch /tmp/pwned']\n", "not valid YAML"),
    ],
)
def test_it_refuses_a_malformed_file_naming_the_line(personas, text, expected) -> None:
    # The file names its own target, or is refused for naming none; the others get one.
    names_its_target = "agent:" in text or expected == "name the target"
    target = {} if names_its_target else {"agent": make_agent(personas.org, personas.operator)}

    problems = problems_of(text, **target)

    assert any(expected in p for p in problems), problems


def test_the_command_reports_a_bad_file_as_a_command_error(personas, tmp_path) -> None:
    agent = make_agent(personas.org, personas.operator)
    path = tmp_path / "bad.yaml"
    path.write_text(f"agent: {agent.pk}\nhooks:\n  - name: deny_tools\n    enabled: maybe\n")

    with pytest.raises(CommandError) as caught:
        call_command("hooks", "import", str(path))

    assert str(caught.value) == f"{path}:4: hooks[0].enabled: must be true or false"


def test_an_import_cannot_reach_an_agent_by_a_file_naming_another_organisations_agent(personas) -> None:
    """The command line names the target; a file's own target is only a default."""
    mine = make_agent(personas.org, personas.operator)
    theirs = make_agent(personas.other_org, personas.stranger)
    text = f"agent: {theirs.pk}\nhooks:\n  - name: deny_tools\n    params: {{tools: x}}\n"

    hooks_import(text=text, filename="x.yaml", agent=mine)

    assert not HookDeclaration.objects.filter(agent=theirs).exists()
    assert HookDeclaration.objects.filter(agent=mine).count() == 1


def test_a_hooks_mode_goes_out_and_comes_back(personas) -> None:
    source = make_agent(personas.org, personas.operator)
    make_hook(source, "deny_tools", params={"tools": "oa__*"}, mode="shadow")
    make_hook(source, "result_truncate", params={"max_chars": 500}, mode="off")
    target = make_agent(personas.org, personas.operator, name="Copy")

    text = hooks_export(agent=source)
    hooks_import(text=text, filename="x.yaml", agent=target)

    assert "mode: shadow" in text and "mode: 'off'" in text and "enabled" not in text
    assert list(target.hook_declarations.order_by("pk").values_list("name", "mode")) == [
        ("deny_tools", "shadow"),
        ("result_truncate", "off"),
    ]


@pytest.mark.parametrize(
    ("fields", "mode"),
    [("enabled: false", "off"), ("enabled: true", "enforce"), ("", "enforce"), ("mode: shadow", "shadow"),
     ("mode: off", "off"), ("mode: 'off'", "off")],
)  # fmt: skip
def test_an_older_file_saying_enabled_still_imports(personas, fields, mode) -> None:
    agent = make_agent(personas.org, personas.operator)
    text = f"hooks:\n  - name: deny_tools\n    params: {{tools: x}}\n    {fields}\n"

    [row] = hooks_import(text=text, filename="x.yaml", agent=agent)

    assert row.mode == mode


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ("mode: loud", "x.yaml:4: hooks[0].mode: must be one of enforce, shadow, off"),
        (
            "mode: shadow\n    enabled: false",
            "x.yaml:5: hooks[0].enabled: contradicts 'mode': keep 'mode' alone",
        ),
    ],
)
def test_a_mode_it_cannot_read_is_refused_naming_the_line(personas, fields, problem) -> None:
    agent = make_agent(personas.org, personas.operator)
    text = f"hooks:\n  - name: deny_tools\n    params: {{tools: x}}\n    {fields}\n"

    with pytest.raises(HookFileError) as caught:
        hooks_import(text=text, filename="x.yaml", agent=agent)

    assert caught.value.problems == [problem]
    assert not HookDeclaration.objects.filter(agent=agent).exists()
