"""The embedded Kubernetes API server: an object store behind real HTTP.

``ObjectStore`` keeps objects and applies the API server's write rules (resourceVersions,
status subresources, validation); ``ApiServer`` serves it in the Kubernetes URL layout so
the official ``kubernetes`` client reaches it through a kubeconfig like a real cluster.

Errors: every failure is an ``ApiError`` (a ``gpuaas.errors.KubeAPIError``) carrying the
``kind: Status`` fields; over HTTP it arrives as that Status body.
"""

from ._errors import ApiError
from ._http import ApiServer, Visibility
from ._rbac import RBACRules
from ._resources import RESOURCES, Resource, convert
from ._schemas import validate
from ._store import ObjectStore, Page, utc_now

__all__ = [
    "RESOURCES",
    "ApiError",
    "ApiServer",
    "ObjectStore",
    "Page",
    "RBACRules",
    "Resource",
    "Visibility",
    "convert",
    "utc_now",
    "validate",
]
