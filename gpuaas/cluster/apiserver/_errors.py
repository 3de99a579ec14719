"""``ApiError``: what the emulated API server answers instead of an object.

It carries exactly what a real API server puts into a ``kind: Status`` body, so the HTTP
layer only has to render it and in-process callers (the Kueue controller, scenario loaders)
can catch it by meaning: it is a :class:`gpuaas.errors.KubeAPIError`.
"""

from __future__ import annotations

from typing import Any

from gpuaas.errors import KubeAPIError

__all__ = ["ApiError", "Cause"]

Cause = dict[str, str]


class ApiError(KubeAPIError):
    """An API failure with the fields of a Kubernetes ``Status``.

    ``details`` holds ``name``, ``group``, ``kind`` and, for 422, ``causes``
    (``[{"reason": "FieldValueInvalid", "message": ..., "field": "spec.x"}]``).
    """

    def __init__(self, status: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        self.details: dict[str, Any] = dict(details or {})
        self.message = message
        super().__init__(
            message,
            status=status,
            reason=reason,
            kind=self.details.get("kind"),
            name=self.details.get("name"),
        )

    def to_status(self) -> dict[str, Any]:
        """The ``kind: Status`` body a real API server would send."""
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.status,
        }

    # Constructors for the answers the emulator gives; the messages copy the real server's.

    @classmethod
    def not_found(cls, qualified: str, name: str, *, group: str, kind: str) -> ApiError:
        details = {"name": name, "group": group, "kind": kind}
        return cls(404, "NotFound", f'{qualified} "{name}" not found', details)

    @classmethod
    def already_exists(cls, qualified: str, name: str, *, group: str, kind: str) -> ApiError:
        details = {"name": name, "group": group, "kind": kind}
        return cls(409, "AlreadyExists", f'{qualified} "{name}" already exists', details)

    @classmethod
    def conflict(cls, qualified: str, name: str, *, group: str, kind: str) -> ApiError:
        message = (
            f'Operation cannot be fulfilled on {qualified} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again"
        )
        return cls(409, "Conflict", message, {"name": name, "group": group, "kind": kind})

    @classmethod
    def invalid(cls, kind: str, group: str, name: str, causes: list[Cause]) -> ApiError:
        subject = f"{kind}.{group}" if group else kind
        joined = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
        if len(causes) > 1:
            joined = f"[{joined}]"
        message = f'{subject} "{name}" is invalid: {joined}'
        details = {"name": name, "group": group, "kind": kind, "causes": causes}
        return cls(422, "Invalid", message, details)

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)
