"""``manage.py hooks import-claude`` and the agent admin's "Import Claude Code hooks" and "Import
FIM One hooks" pages: what an operator sees, who may, and files that cannot be imported."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from agents.models import Agent, HookDeclaration
from tests.admin_kit import grant, logged_in, page_text, url
from tests.personas import make_agent, make_hook

PROJECT = Path(__file__).resolve().parent.parent / "claude_hooks"
SETTINGS = PROJECT / "settings.json"
pytestmark = pytest.mark.usefixtures("no_dispatch")


def import_claude(*args: str) -> str:
    out = io.StringIO()
    call_command("hooks", "import-claude", *args, stdout=out)
    return out.getvalue()


# --- the command -----------------------------------------------------------------------------------


def test_import_claude_appends_the_files_hooks_and_reports_what_it_imported_and_skipped(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    make_hook(agent, "deny_tools", params={"tools": "oa__danger"})

    report = import_claude(str(SETTINGS), "--agent", str(agent.pk), "--project-dir", str(PROJECT))

    rows = list(HookDeclaration.objects.filter(agent=agent).order_by("pk"))
    assert [r.name for r in rows] == [
        "deny_tools",
        "bash_validator.py (PreToolUse Bash)",
        "file_guard.py (PreToolUse Write|Edit)",
        "auto_approve.py (PreToolUse Read|Write|Edit)",
    ], "appended after the agent's own"
    assert report.splitlines()[0] == "Claude Code settings: imported 3 hook declaration(s)"
    assert (
        f"  + bash_validator.py (PreToolUse Bash): PreToolUse; for re:(?:[a-z][a-z0-9_]*__)?(?:Bash); "
        f"argv {PROJECT}/bash_validator.py; timeout 5 s"
    ) in report
    assert f"      $CLAUDE_PROJECT_DIR → {PROJECT} (in its environment too)" in report
    assert "skipped 1:" in report
    assert (
        "  - hooks.Stop[0].hooks[0] (prompt): Stop: runs when the model has finished its answer: "
        "this platform has no hook point for it"
    ) in report


def test_a_dry_run_prints_what_it_would_import_and_saves_nothing(personas) -> None:
    agent = make_agent(personas.org, personas.operator)

    report = import_claude(
        str(SETTINGS), "--agent", str(agent.pk), "--project-dir", str(PROJECT), "--dry-run"
    )

    assert report.startswith(
        "Claude Code settings: would import (dry run: nothing saved) 3 hook declaration(s)"
    )
    assert not HookDeclaration.objects.exists()


def test_without_the_project_directory_every_command_naming_it_is_skipped_saying_so(personas) -> None:
    agent = make_agent(personas.org, personas.operator)

    report = import_claude(str(SETTINGS), "--agent", str(agent.pk))

    assert "imported 0 hook declaration(s)" in report and "skipped 4:" in report
    assert report.count("uses $CLAUDE_PROJECT_DIR: give the project directory (--project-dir)") == 3
    assert not HookDeclaration.objects.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("hooks:\n  PreToolUse: []\n", "not JSON: "),
        ('{"hooks": {"PreToolUse": {"matcher": "Bash"}}}', "hooks.PreToolUse: must be a list of"),
        ('{"permissions": {"allow": ["Bash"]}}', "(top): there is no 'hooks' block"),
    ],
)
def test_a_file_that_cannot_be_imported_exits_non_zero_with_the_reason(
    personas, tmp_path, content, message
) -> None:
    agent = make_agent(personas.org, personas.operator)
    path = tmp_path / "settings.json"
    path.write_text(content)

    with pytest.raises(CommandError) as caught:
        import_claude(str(path), "--agent", str(agent.pk))

    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)
    assert not HookDeclaration.objects.exists()


def test_a_missing_file_or_agent_is_named(personas, tmp_path) -> None:
    agent = make_agent(personas.org, personas.operator)

    with pytest.raises(CommandError, match="cannot be read"):
        import_claude(str(tmp_path / "nowhere.json"), "--agent", str(agent.pk))
    with pytest.raises(CommandError, match="no agent with id 999999"):
        import_claude(str(SETTINGS), "--agent", "999999")


# --- the admin pages -----------------------------------------------------------------------------


def claude_page(agent: Agent) -> str:
    return reverse("admin:agents_agent_import_claude", args=[agent.pk])


def fimone_page(agent: Agent) -> str:
    return reverse("admin:agents_agent_import_fimone", args=[agent.pk])


def upload(path: Path = SETTINGS) -> SimpleUploadedFile:
    return SimpleUploadedFile(path.name, path.read_bytes(), content_type="application/json")


def test_an_operator_with_the_code_hooks_permission_imports_a_settings_file_and_reads_what_was_skipped(
    governed,
) -> None:
    agent = make_agent(governed.org, governed.operator)
    grant(governed.operator, "manage_code_hooks", app_label="agents")
    client = logged_in(governed.operator)
    assert "Import Claude Code hooks" in page_text(client.get(url(Agent, "change", agent.pk)))

    response = client.post(
        claude_page(agent), {"file": upload(), "project_dir": str(PROJECT), "_import": "Import"}, follow=True
    )

    assert response.redirect_chain[-1][0] == url(Agent, "change", agent.pk)
    text = page_text(response)
    assert "Claude Code settings: imported 3 hook declaration(s): bash_validator.py (PreToolUse Bash)" in text
    assert (
        "Skipped hooks.Stop[0].hooks[0] (prompt): Stop: runs when the model has finished its answer" in text
    )
    assert HookDeclaration.objects.filter(agent=agent, kind="command").count() == 3


def test_the_preview_shows_what_would_be_imported_and_saves_nothing(governed) -> None:
    agent = make_agent(governed.org, governed.operator)
    grant(governed.operator, "manage_code_hooks", app_label="agents")

    response = logged_in(governed.operator).post(
        claude_page(agent),
        {"text": SETTINGS.read_text(), "project_dir": str(PROJECT), "_preview": "Preview"},
    )

    assert response.status_code == 200
    text = page_text(response)
    assert "Preview: nothing is saved" in text
    assert "would import (dry run: nothing saved) 3 hook declaration(s)" in text
    assert not HookDeclaration.objects.exists()


def test_an_operator_without_the_code_hooks_permission_is_refused_the_claude_import(governed) -> None:
    agent = make_agent(governed.org, governed.operator)
    client = logged_in(governed.operator)

    page = page_text(client.get(url(Agent, "change", agent.pk)))
    assert "Import Claude Code hooks" not in page and "Import FIM One hooks" in page
    assert client.get(claude_page(agent)).status_code == 403
    response = client.post(claude_page(agent), {"file": upload(), "project_dir": str(PROJECT)})

    assert response.status_code == 403
    assert not HookDeclaration.objects.exists()


def test_another_organisations_agent_is_not_found(governed) -> None:
    theirs = make_agent(governed.other_org, governed.stranger, name="Globex agent")
    grant(governed.operator, "manage_code_hooks", app_label="agents")
    client = logged_in(governed.operator)

    assert client.get(claude_page(theirs)).status_code == 404
    assert (
        client.post(fimone_page(theirs), {"text": '{"hooks": {"builtin": ["result_truncator"]}}'}).status_code
        == 404
    )
    assert not HookDeclaration.objects.exists()


def test_an_auditor_may_not_import(governed) -> None:
    agent = make_agent(governed.org, governed.operator)

    assert logged_in(governed.auditor).get(fimone_page(agent)).status_code == 403


def test_a_file_that_is_not_json_is_a_form_error_and_nothing_is_saved(governed) -> None:
    agent = make_agent(governed.org, governed.operator)
    grant(governed.operator, "manage_code_hooks", app_label="agents")
    bad = SimpleUploadedFile("settings.json", b"{not: json", content_type="application/json")

    response = logged_in(governed.operator).post(claude_page(agent), {"file": bad, "_import": "Import"})

    assert response.status_code == 200
    assert "not JSON: " in page_text(response)
    assert not HookDeclaration.objects.exists()


def test_a_relative_project_directory_is_a_form_error(governed) -> None:
    agent = make_agent(governed.org, governed.operator)
    grant(governed.operator, "manage_code_hooks", app_label="agents")

    response = logged_in(governed.operator).post(
        claude_page(agent), {"text": SETTINGS.read_text(), "project_dir": "claude_hooks"}
    )

    assert "Give an absolute path (it starts with /)." in page_text(response)
    assert not HookDeclaration.objects.exists()


def test_an_operator_imports_fim_one_hooks_without_the_code_hooks_permission(governed) -> None:
    agent = make_agent(governed.org, governed.operator)
    fim_one = (
        '{"model_config_json": {"hooks": {"class_hooks": ["feishu_gate"], "builtin": ["result_truncator"]}}}'
    )

    response = logged_in(governed.operator).post(fimone_page(agent), {"text": fim_one}, follow=True)

    text = page_text(response)
    assert "FIM One agent configuration: imported 1 hook declaration(s): result_truncate." in text
    assert "(feishu_gate): the approval gate (confirmation_gate), attached to every agent here" in text
    assert list(HookDeclaration.objects.values_list("name", "params")) == [
        ("result_truncate", {"max_chars": 8000})
    ]


def test_an_unknown_fim_one_name_is_a_form_error_listing_the_known_names(governed) -> None:
    agent = make_agent(governed.org, governed.operator)

    response = logged_in(governed.operator).post(
        fimone_page(agent), {"text": '{"hooks": {"class_hooks": ["x"]}}'}
    )

    assert response.status_code == 200
    assert (
        "unknown hook name(s) 'x': known names are FIM One's: connector_call_logger, feishu_gate"
        in page_text(response)
    )
    assert not HookDeclaration.objects.exists()
