"""``RBACRules``: a ClusterRole's rules, checked the way the API server's authorizer does.

gpuaas ships an RBAC role for its service account; giving the emulator the same rules lets
tests prove the flows never need a verb the role does not grant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuaas._yaml import read_yaml_documents
from gpuaas.errors import ConfigError

from ._errors import ApiError

__all__ = ["SERVICE_ACCOUNT", "RBACRules"]


SERVICE_ACCOUNT = "system:serviceaccount:gpuaas:gpuaas"
"""Whom the rules are bound to, as a real API server names the ServiceAccount ``rbac.yaml`` binds its roles to."""


class RBACRules:
    """Rules like ``{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch"]}``."""

    def __init__(self, rules: Iterable[Mapping[str, Sequence[str]]], user: str = SERVICE_ACCOUNT) -> None:
        self.rules = [
            (frozenset(r.get("apiGroups", ())), frozenset(r.get("resources", ())), frozenset(r.get("verbs", ())))
            for r in rules
        ]
        self.user = user

    @classmethod
    def from_manifest(cls, path: Path | str, roles: Sequence[str], user: str = SERVICE_ACCOUNT) -> RBACRules:
        """The union of the named ClusterRoles/Roles in a multi-document RBAC manifest."""
        documents = [d for d in read_yaml_documents(path, "RBAC manifest") if isinstance(d, dict)]
        found = {_name(d): d for d in documents if d.get("kind") in ("ClusterRole", "Role")}
        missing = [r for r in roles if r not in found]
        if missing:
            known = ", ".join(sorted(str(n) for n in found if n is not None)) or "none"
            raise ConfigError(f"no ClusterRole or Role named {', '.join(missing)} (found: {known})", file=path)
        return cls([rule for role in roles for rule in _rules(found[role], path)], user=user)

    def allows(self, verb: str, group: str, resource: str) -> bool:
        """``resource`` may carry a subresource: ``workloads/status``."""
        return any(
            ("*" in groups or group in groups)
            and ("*" in resources or resource in resources)
            and ("*" in verbs or verb in verbs)
            for groups, resources, verbs in self.rules
        )

    def check(self, verb: str, group: str, plural: str, subresource: str | None, namespace: str | None,
              name: str | None) -> None:
        """Raise the real server's 403 when the rules do not grant ``verb``."""
        resource = f"{plural}/{subresource}" if subresource else plural
        if self.allows(verb, group, resource):
            return
        qualified = f"{plural}.{group}" if group else plural
        subject = f'{qualified} "{name}"' if name else qualified
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        message = (
            f'{subject} is forbidden: User "{self.user}" cannot {verb} resource "{resource}" '
            f'in API group "{group}" {scope}'
        )
        details: dict[str, Any] = {"group": group, "kind": plural}
        if name:
            details["name"] = name
        raise ApiError(403, "Forbidden", message, details)


def _name(document: Mapping[str, Any]) -> object:
    metadata = document.get("metadata")
    return metadata.get("name") if isinstance(metadata, dict) else None


_RULE_FIELDS = ("apiGroups", "resources", "verbs")


def _rules(role: Mapping[str, Any], path: Path | str) -> list[dict[str, list[str]]]:
    """The role's rules, each field a list of strings as the API server requires: a bare ``verbs: get``
    would be read as the letters g, e and t, and grant nothing anyone meant."""
    rules = role.get("rules") or []
    where = f"{role.get('kind')} {_name(role)}: rules"
    if not isinstance(rules, list):
        raise ConfigError(f"must be a list of rules, got {rules!r}", file=path, field=where)
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            raise ConfigError(f"must be a mapping, got {rule!r}", file=path, field=f"{where}[{i}]")
        for key in _RULE_FIELDS:
            value = rule.get(key)
            if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise ConfigError(f"must be a list of strings, got {value!r}", file=path, field=f"{where}[{i}].{key}")
    return [{key: rule.get(key) or [] for key in _RULE_FIELDS} for rule in rules]
