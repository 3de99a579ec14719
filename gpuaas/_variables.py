"""The ``GPUAAS_*`` variables read or written outside ``GpuaasSettings``, named once, and the checks of what is set
that need no settings model.

Below the settings and the command line both: the settings refuse a variable one typo away from any
name gpuaas reads (these included, ``misspelt_variable``) and a database URL without its dialect, or a SQLite one
without a file or with options (``check_database_url``), and the configuration reference documents the variables.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import SecretStr

__all__ = ["OTHER_VARIABLES", "check_database_url", "misspelt_variable"]

OTHER_VARIABLES: tuple[tuple[str, str, str, str], ...] = (
    ("GPUAAS_NOTIFY_WEBHOOK_URL", "str", "unset",
     "Where a flow run that failed, crashed or ended degraded is reported, as a JSON POST (`tasks/notify.py`); "
     "else the Prefect Secret block `gpuaas-notify-webhook-url`; neither: no notification. Never logged."),
    ("GPUAAS_PROJECT_DIR", "Path", "unset",
     "The directory the deployments' flow runs start in (the gpuaas checkout or the image's path), read by "
     "`prefect deploy` and the worker for `prefect.yaml`'s pull step; unset: where gpuaas is installed."),
    ("GPUAAS_CLUSTER_TOKEN", "str", "unset",
     "`gpuaas cluster up --token`: the bearer token the embedded API requires on every request (401 without "
     "it); the kubeconfig written carries it."),
    ("GPUAAS_K8S_CACHE", "Path", "`~/.cache/gpuaas/k8s`",
     "Root of the cache of the real backend's binaries (`gpuaas cluster up --backend real`), one directory "
     "per set of versions."),
    ("GPUAAS_ENDPOINT_<NAMESPACE>_<NAME>", "str", "(written)",
     "Written, not read: `gpuaas cluster up --env-file` gives each InferenceService's OpenAI-compatible "
     "endpoint URL (namespace and name in capitals, other characters `_`), for `gpuaas loadtest --url`."),
    ("GPUAAS_TEST_POSTGRES_URL", "str", "unset",
     "Tests and benchmarks only: a running PostgreSQL they use instead of starting their own."),
)
"""The ``GPUAAS_*`` variables read (or written) outside ``GpuaasSettings``: name, type, default, what for.
The configuration reference lists them after the settings; ``tests/test_docs.py`` fails when the code
names a ``GPUAAS_`` variable that the reference does not."""


def misspelt_variable(settings: Iterable[str], environ: Mapping[str, str]) -> str | None:
    """The first ``GPUAAS_*`` variable of ``environ`` that no one reads but that is one typo from one that is read
    (``settings``, the settings' variables, or ``OTHER_VARIABLES``), with the name it is close to: pydantic-settings
    skips a variable that names no setting, so a misspelt GPUAAS_POLICY_FILE left the policy at its defaults (its
    exclusions and disabled tenants gone) without a word. Only near misses are refused: a variable of another tool
    (or a script's own) is none of gpuaas's business, and one set to nothing is unset, as every setting's is."""
    import difflib

    read = [*settings, *(name for name, *_ in OTHER_VARIABLES if "<" not in name)]
    for name in sorted(key.upper() for key, value in environ.items() if key.upper().startswith("GPUAAS_") and value):
        if name in read or name.startswith(("GPUAAS_ENDPOINT_", "GPUAAS_TEST_")) \
                or any(name.startswith(f"{known}__") for known in read):
            continue
        close = difflib.get_close_matches(name, read, n=1, cutoff=0.85)
        if close:
            return f"{name} is no gpuaas variable: did you mean {close[0]}? (as it is, it is ignored)"
    return None


def check_database_url(value: SecretStr) -> SecretStr:
    """A database URL names its dialect (``sqlite:///…``, ``postgresql+psycopg2://…``): anything else fails when the
    store opens, as "cannot open database", without the variable's name. Checked without SQLAlchemy (whose import
    every command would pay) and without showing the value (it may hold a password). A SQLite URL is checked
    further (``_sqlite_url_problem``)."""
    url = value.get_secret_value()
    if not re.match(r"[A-Za-z][A-Za-z0-9]*(\+[A-Za-z0-9_]+)?://", url):
        raise ValueError("not a database URL: write dialect://…, e.g. sqlite:////var/lib/gpuaas/gpuaas.db or "
                         "postgresql+psycopg2://gpuaas@db:5432/gpuaas")
    if url.partition("://")[0].partition("+")[0] == "sqlite":
        problem = _sqlite_url_problem(url.partition("://")[2])
        if problem is not None:
            raise ValueError(problem)
    return value


_SQLITE_FORMS = "sqlite:////absolute/path/gpuaas.db or sqlite:///relative/path/gpuaas.db"


def _sqlite_url_problem(rest: str) -> str | None:
    """What is wrong with a SQLite URL (``rest``: what follows ``sqlite://``), or None.

    The database must outlive the process: the audit log is what ``gpuaas undo`` and ``gpuaas audit`` read, and the
    writes lock is a row other processes must see. SQLAlchemy opens an in-memory database for a URL with no file
    (``sqlite://``, ``sqlite:///``, ``:memory:``), so a reclaim applied there kept its audit rows in memory only.

    The URL takes no query options. SQLAlchemy's pysqlite dialect (``create_connect_args``) drops, with a warning,
    all but ``uri``, ``timeout``, ``isolation_level``, ``detect_types``, ``check_same_thread`` and
    ``cached_statements``, and none of those is one gpuaas can honour: the store sets the busy timeout itself on each
    connection (replacing ``timeout``); ``uri`` makes the path a SQLite URI whose options (``mode=ro``,
    ``mode=memory``, ``immutable``) get past the store's own checks of the file; ``detect_types`` and
    ``isolation_level`` change what the driver hands SQLAlchemy (dates, transactions); ``check_same_thread=true``
    breaks the pool's connections across a flow's threads; ``cached_statements`` tunes nothing gpuaas needs. An
    option is refused by name rather than dropped, so that what the URL says is what is done."""
    from urllib.parse import parse_qsl, unquote

    where, _, query = rest.partition("?")
    host, slash, path = where.partition("/")
    if host:
        return f"a SQLite URL names a file, not a host: write {_SQLITE_FORMS}"
    if unquote(path) in ("", ":memory:") or not slash:
        return ("a SQLite URL without a file is an in-memory database, gone when the process ends (its audit log "
                f"and writes lock with it): write {_SQLITE_FORMS}")
    try:
        folder = Path(unquote(path)).expanduser().is_dir()  # "no database there yet", then an upgrade that cannot open
    except OSError:  # not to be looked at from here (a folder of the service's own): the store says what it finds
        folder = False
    if folder:
        return f"a SQLite URL names the database's file, and {unquote(path)} is a directory: write {_SQLITE_FORMS}"
    options = sorted({name for name, _ in parse_qsl(query, keep_blank_values=True)})
    if options:
        named = ", ".join(repr(name) for name in options)
        return (f"a SQLite URL takes no query options (this one has {named}): gpuaas decides how the file is opened "
                "(WAL, its own busy timeout); remove the '?' and what follows")
    return None
