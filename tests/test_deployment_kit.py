"""deployments/kubernetes/ holds together: the work-pool template, the manifests and the flow image.

No container engine runs on this machine, so the Containerfile is linted: known instructions, a
pinned base image, every COPY source present, the project installed, a non-root user.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import yaml
from prefect.utilities.templating import find_placeholders

from gpuaas.actions._patches import KIND_RESOURCES
from gpuaas.permissions import BINDINGS

KIT = Path(__file__).resolve().parents[1] / "deployments" / "kubernetes"
ROOT = KIT.parents[1]
INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
                "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", (KIT / "Containerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0], line.split(None, 1)[1]) for line in lines]


def test_containerfile_lints() -> None:
    steps = _instructions()
    assert {op for op, _ in steps} <= INSTRUCTIONS, steps
    assert steps[0][0] == "FROM" and re.search(r":[0-9][\w.-]*$", steps[0][1]), "pin the base image's tag"
    for op, args in steps:
        if op == "COPY":
            for source in args.split()[:-1]:
                assert (ROOT / source).exists(), f"COPY {source}: not in the project"
    runs = " ".join(args for op, args in steps if op == "RUN")
    assert "pip install" in runs and " -e ." in runs
    users = [args for op, args in steps if op == "USER"]
    assert users and users[-1] not in ("root", "0")
    copied = {s.rstrip("/").removeprefix("./") for op, args in steps if op == "COPY" for s in args.split()[:-1]}
    assert {"gpuaas", "flows", "tasks", "reports", "pyproject.toml"} <= copied


def test_base_job_template_runs_flows_as_the_shipped_service_account() -> None:
    template = json.loads((KIT / "base-job-template.json").read_text())
    variables = template["variables"]
    jsonschema.Draft7Validator.check_schema(variables)
    used = {p.name for p in find_placeholders(template["job_configuration"])}
    assert used <= set(variables["properties"]), used - set(variables["properties"])
    rbac = list(yaml.safe_load_all((KIT / "rbac.yaml").read_text()))
    account = next(d for d in rbac if d["kind"] == "ServiceAccount")["metadata"]
    namespace = yaml.safe_load((KIT / "namespace.yaml").read_text())["metadata"]["name"]
    assert variables["properties"]["service_account_name"]["default"] == account["name"]
    assert variables["properties"]["namespace"]["default"] == account["namespace"] == namespace
    subject = {"kind": "ServiceAccount", "name": account["name"], "namespace": namespace}

    def bound(documents: list[dict]) -> set[str]:  # type: ignore[type-arg]
        return {d["roleRef"]["name"] for d in documents if d["kind"] == "ClusterRoleBinding" if subject in d["subjects"]}

    roles = {d["metadata"]["name"] for d in rbac if d["kind"] == "ClusterRole"}
    assert bound(rbac) == {"gpuaas-reader"}  # applied alone: read-only, whatever the policy says
    for role, file in BINDINGS.items():  # each writer role bound by its own file, to that account
        assert bound(list(yaml.safe_load_all((KIT / file).read_text()))) == {role}, file
    assert set(BINDINGS) == roles


WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


def test_the_admission_policy_matches_every_kind_the_writer_roles_may_change() -> None:
    """RBAC cannot limit a patch to fields, so ``admission-policy.yaml`` must match every resource a role of
    ``rbac.yaml`` may write (Events aside: gpuaas creates them, they change no workload), every kind gpuaas patches,
    for every write operation, and deny for the kit's service account; a role given a new resource without the policy
    fails here. What it lets through is proven on a real API server (tests/real/test_admission_policy_real.py)."""
    policy, binding = [d for d in yaml.safe_load_all((KIT / "admission-policy.yaml").read_text()) if d]
    assert (policy["apiVersion"], policy["kind"], binding["kind"]) == (
        "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert all(set(r["operations"]) == {"CREATE", "UPDATE", "DELETE"} and r["apiVersions"] == ["*"] for r in rules)
    matched = {(g, res) for r in rules for g in r["apiGroups"] for res in r["resources"]}
    rbac = list(yaml.safe_load_all((KIT / "rbac.yaml").read_text()))
    writable = {(g, res) for d in rbac if d["kind"] == "ClusterRole" for rule in d["rules"]
                if set(rule["verbs"]) & WRITE_VERBS for g in rule["apiGroups"] for res in rule["resources"]}
    assert writable - {("events.k8s.io", "events")} == matched
    assert {(group, plural) for group, _, plural in KIND_RESOURCES.values()} == matched
    account = next(d for d in rbac if d["kind"] == "ServiceAccount")["metadata"]
    [condition] = policy["spec"]["matchConditions"]
    assert condition["expression"] == (
        f"request.userInfo.username.startsWith('system:serviceaccount:{account['namespace']}:')")
