"""The backup account's stack, deployed under one name in each Region copies go to: IAM names
are unique within an account (IAM API reference, CreateRole, RoleName), and the emulation
refuses a second role of one name in an account as IAM does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raidsnap_emulation.harness import BACKUP_ACCOUNT_CONFIG, Emulation, synthesize

BACKUP_ACCOUNT = "222233334444"


@pytest.fixture(scope="module")
def vault_template() -> Path:
    return synthesize(config=BACKUP_ACCOUNT_CONFIG)


def test_the_backup_accounts_stack_deploys_in_two_regions_of_that_account(
    vault_template: Path, template: Path
) -> None:
    with Emulation(template) as emu:
        west = emu.deploy("us-west-2", BACKUP_ACCOUNT, template=vault_template)
        eu = emu.deploy("eu-west-1", BACKUP_ACCOUNT, template=vault_template)
        assert west.stack.role_names() & eu.stack.role_names() == set()
        assert "raidsnap-copy-requests-eu-west-1" in eu.stack.role_names()


def test_the_emulation_refuses_a_second_role_of_one_name_in_an_account(
    vault_template: Path, template: Path, tmp_path: Path
) -> None:
    # GIVEN a template that names its copy-requests role alike in every Region
    body = json.loads(vault_template.read_text())
    for res in body["Resources"].values():
        if res["Type"] == "AWS::IAM::Role" and "RoleName" in res["Properties"]:
            res["Properties"]["RoleName"] = "Raidsnap-Copy-Requests"
    fixed = tmp_path / "fixed.template.json"
    fixed.write_text(json.dumps(body))
    with Emulation(template) as emu:
        emu.deploy("us-west-2", BACKUP_ACCOUNT, template=fixed)
        # WHEN it is deployed in a second Region of that account, THEN IAM refuses the name
        # (names differ only in case count as one)
        body["Resources"] = {
            k: (
                {**r, "Properties": {**r["Properties"], "RoleName": "raidsnap-copy-requests"}}
                if r["Type"] == "AWS::IAM::Role" and "RoleName" in r["Properties"]
                else r
            )
            for k, r in body["Resources"].items()
        }
        lower = tmp_path / "lower.template.json"
        lower.write_text(json.dumps(body))
        with pytest.raises(ValueError, match="EntityAlreadyExists"):
            emu.deploy("eu-west-1", BACKUP_ACCOUNT, template=lower)
        # ... and another account may have a role of that name
        emu.deploy("eu-west-1", "333344445555", template=fixed)
