"""The README is what a new user and an on-call engineer need first: one screen of what, why and
the limits, a table of contents that leads somewhere, the runbook near the top, a deploy path
that names real files, and every input and setting the code accepts."""

from __future__ import annotations

import re
from pathlib import Path

from raidsnap import tags
from raidsnap.models import BackupInput, DrillInput, RestoreInput

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
DOCS = sorted((ROOT / "docs").glob("*.md"))


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def test_the_first_screen_says_what_why_the_limits_and_when_to_use_something_else() -> None:
    first = "\n".join(README.splitlines()[:45])
    for words in (
        "**Why.**",
        "**Limits.**",
        "cross-Region",
        "by count only",
        "Data Lifecycle Manager",
        "AWS Backup",
    ):
        assert words in first, words
    assert (
        README.index("## Contents")
        < README.index("## Emergency runbook")
        < README.index("## Quick start")
    )


def test_every_link_of_the_readme_and_the_docs_leads_somewhere() -> None:
    for path in [ROOT / "README.md", *DOCS]:
        text = path.read_text()
        anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith("https://"):
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            assert linked.exists(), (path.name, target)
            if anchor and linked.suffix == ".md":
                heads = re.findall(r"^#+ (.+)$", linked.read_text(), re.M)
                assert anchor in ({_slug(h) for h in heads} if file else anchors), (
                    path.name,
                    target,
                )


def test_every_raidsnap_tag_the_docs_name_is_one_raidsnap_writes() -> None:
    defined = {v for k, v in vars(tags).items() if k.isupper() and isinstance(v, str)}
    for path in [ROOT / "README.md", *DOCS]:
        named = set(re.findall(r"raidsnap:[a-z][a-z-]*[a-z]", path.read_text()))
        assert named - {"raidsnap:array"} <= defined, (path.name, sorted(named - defined))


def test_the_runbook_restores_with_a_plan_and_falls_back_to_the_tags() -> None:
    runbook = _section("Emergency runbook")
    for words in (
        "raidsnap sets",
        "restore db1 --mode replace --dry-run",
        "raidsnap restore db1 --mode replace",
        "--yes",
        "raidsnap:replaced-by",
        "mdadm --assemble",
        "--uuid=<raidsnap:md-uuid>",
        tags.SET_ID,
        tags.MEMBER_INDEX,
        tags.MEMBER_COUNT,
        tags.DEGRADED,
        "never run `mdadm --create`".capitalize(),
    ):
        assert words in runbook, words
    # its durations are the restore-time model's own figures (docs/restore-time.md)
    model = (ROOT / "docs" / "restore-time.md").read_text()
    for figure in ("58 min", "1 h 57 min", "2 h for 1 TiB", "3,518 s", "107,189 s"):
        assert figure in runbook and figure in model, figure


def test_the_quick_start_is_two_commands() -> None:
    block = re.search(r"```sh\n(.*?)```", _section("Quick start"), re.S)
    assert block
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert [c for c in commands if c] == ["make demo", "make test"]


def test_the_deploy_path_bootstraps_copies_a_config_that_it_then_deploys() -> None:
    deploying = _section("Deploying")
    block = re.search(r"```sh\n(.*?)```", deploying, re.S)
    assert block
    lines = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert "npx cdk bootstrap" in lines
    copy = next(line for line in lines if line.startswith("cp config/example.yaml "))
    config = copy.split()[-1]
    assert f"npx cdk deploy -c config={config}" in lines
    assert (ROOT / "config" / "example.yaml").exists()
    assert "Confirm the subscriptions" in deploying


def test_every_input_field_is_documented() -> None:
    for model, section in (
        (RestoreInput, "Restoring"),
        (BackupInput, "Backups"),
        (DrillInput, "Automated recovery and drills"),
    ):
        text = _section(section)
        documented = set(re.findall(r"^\| ([^|]+)\|", text, re.M))
        for field in model.model_fields:
            assert any(f"`{field}`" in cell for cell in documented), (model.__name__, field)


def test_every_config_setting_is_documented() -> None:
    config = (ROOT / "lib" / "config.ts").read_text()
    table = _section("Configuration")
    for field, allowed in re.findall(
        r"only\((?:raw|obj), (?:'([^']+)'|field), \[([^\]]+)\]", config
    ):
        for key in re.findall(r"'(\w+)'", allowed):
            assert re.search(rf"[`.]{key}[`.]", table), (field or "arrays.<name>...", key)
