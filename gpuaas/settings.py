"""The one configuration object: ``GpuaasSettings``.

Values come from arguments, then ``GPUAAS_*`` environment variables (``__`` nests), then the
Prefect Secret blocks for the secrets (``gpuaas._secret_blocks``: only where a Prefect API is
configured), then defaults; ``load_settings()`` is the one way every flow, task and command loads
them. The policy YAML named by ``GPUAAS_POLICY_FILE`` is validated into ``settings.policy``. Anything
that says *where* (endpoints, files, database) is a setting; anything that says *what may be
done* is policy, so that the policy file can be reviewed like code.
"""

from __future__ import annotations

import os
import re
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from gpuaas._label_matchers import LabelMatcher, label_matchers
from gpuaas._secret_blocks import SECRET_BLOCKS, PrefectSecretBlocks, secret_block
from gpuaas._source_access import (
    CaBundle,
    Headers,
    HttpUrl,
    Token,
    TokenFile,
    auth_problem,
    header_value_problem,
    http_url_problem,
    read_token_file,
    token_problem,
)
from gpuaas._validation import shown_message
from gpuaas._variables import check_database_url, misspelt_variable
from gpuaas.errors import ConfigError
from gpuaas.policy import Policy, load_policy

__all__ = ["SECRET_BLOCKS", "GpuaasSettings", "LabelMatcher", "MetricNames", "default_data_dir",
           "header_value_problem", "http_url_problem", "label_matchers", "load_settings", "read_token_file",
           "secret_block", "token_problem"]


def default_data_dir() -> Path:
    """Per-user data directory: ``$XDG_DATA_HOME/gpuaas`` or ``~/.local/share/gpuaas``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "gpuaas"


def _named(pattern: str, what: str) -> AfterValidator:
    """A metric or label name goes into PromQL as it is written: one Prometheus cannot hold (a blank, a brace,
    ``dcgm-util``) would fail every query of every run as a source error, or change what the query asks, so it
    is refused when the settings load, naming the variable."""
    def check(value: str) -> str:
        if not re.fullmatch(pattern, value):
            raise ValueError(f"{value!r} is not a Prometheus {what} name ({pattern})")
        return value

    return AfterValidator(check)


MetricName = Annotated[str, _named(r"[a-zA-Z_:][a-zA-Z0-9_:]*", "metric")]
LabelNames = Annotated[list[Annotated[str, _named(r"[a-zA-Z_][a-zA-Z0-9_]*", "label")]], Field(min_length=1)]
"""At least one: with none, no series would carry the pod, namespace or host, and every workload's telemetry
would read as missing."""


def dcgm_scale(metric: str) -> float | None:
    """The full scale of a DCGM field as dcgm-exporter writes it: 1 for the ``DCGM_FI_PROF_*`` ratios (0-1), 100
    for the ``DCGM_FI_DEV_*_UTIL`` percentages (0-100); None for any other name (a recording rule), whose scale
    only the operator knows."""
    if re.fullmatch(r"DCGM_FI_PROF_\w+", metric):
        return 1.0
    if re.fullmatch(r"DCGM_FI_DEV_\w*_UTIL", metric):
        return 100.0
    return None


ActivityScale = Annotated[float, Field(gt=0)] | None

def _matchers(value: str) -> str:
    label_matchers(value)
    return value


LabelMatchers = Annotated[str, AfterValidator(_matchers)]
"""PromQL label matchers as written (``job="nvidia-dcgm-exporter"``), checked when the settings load."""


def _currency_code(value: str) -> str:
    """An ISO 4217 code as OpenCost's ``currencyCode`` names its prices' currency: three capital letters. Anything
    else (``eur``, ``€``, ``EURO``) is refused when the settings load, naming the variable, rather than printed
    after every amount of the cost report."""
    if not re.fullmatch(r"[A-Z]{3}", value):
        raise ValueError(f"{value!r} is not an ISO 4217 currency code: three capital letters, e.g. USD, EUR, JPY")
    return value


CurrencyCode = Annotated[str, AfterValidator(_currency_code)]


class MetricNames(BaseModel):
    """Metric and label names; the defaults match a standard GPU Operator + Kueue + vLLM install."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    gpu_activity: MetricName = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    """The GPU's duty cycle, read first (``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` is reported per MIG instance)."""
    gpu_activity_scale: ActivityScale = Field(default=None, validate_default=True)
    """What ``GPU_ACTIVITY`` reads when fully busy; its readings are divided by it. Unset for a DCGM field, whose
    scale is known (1 for the ``DCGM_FI_PROF_*`` ratios, 100 for the ``DCGM_FI_DEV_*_UTIL`` percentages, whichever
    variable names them); required for any other name (a recording rule): 1 for a ratio, 100 for a percentage."""
    gpu_util_fallback: MetricName = "DCGM_FI_DEV_GPU_UTIL"
    """Read for a GPU without ``GPU_ACTIVITY`` in the window (no profiling metrics: older GPUs)."""
    gpu_util_fallback_scale: ActivityScale = Field(default=None, validate_default=True)
    """What ``GPU_UTIL_FALLBACK`` reads when fully busy, as ``GPU_ACTIVITY_SCALE`` is for its metric."""
    fb_used: MetricName = "DCGM_FI_DEV_FB_USED"
    power: MetricName = "DCGM_FI_DEV_POWER_USAGE"
    temperature: MetricName = "DCGM_FI_DEV_GPU_TEMP"
    xid_errors: MetricName = "DCGM_FI_DEV_XID_ERRORS"
    vllm_request_success: MetricName = "vllm:request_success_total"
    vllm_e2e_latency: MetricName = "vllm:e2e_request_latency_seconds"
    pod_labels: LabelNames = Field(default=["pod", "exported_pod"])
    namespace_labels: LabelNames = Field(default=["namespace", "exported_namespace"])
    hostname_labels: LabelNames = Field(default=["Hostname", "hostname"])
    dcgm_selector: LabelMatchers | None = None
    """PromQL label matchers every GPU series above is read with, e.g. ``job="nvidia-dcgm-exporter"`` (comma-separated;
    ``=``, ``!=``, ``=~``, ``!~``). Set it where other targets are scraped too (a tenant's PodMonitor): any target can
    write a series under a DCGM metric's name with another pod's ``pod`` and ``namespace`` (kept as ``exported_*``),
    which would count as that pod's GPU telemetry. Unset: every series of those names."""
    vllm_selector: LabelMatchers | None = None
    """The same for the serving series (``VLLM_REQUEST_SUCCESS``, ``VLLM_E2E_LATENCY`` and a service's own latency
    histogram), e.g. ``job="vllm"``: requests another target writes under another pod's labels are not its outcomes."""
    sample_interval_seconds: Annotated[float, Field(gt=0, le=3600)] = 15
    """How often GPU series are scraped; coverage of a window = samples seen / samples expected."""

    @field_validator("gpu_activity_scale", "gpu_util_fallback_scale")
    @classmethod
    def _scale_of_its_metric(cls, value: float | None, info: ValidationInfo) -> float | None:
        """The scale goes with the metric a slot names, never with the slot: read at the other slot's scale, a
        ratio divided by 100 reads a MIG instance at 70 % as idle, and a percentage left undivided reads every GPU
        at 1 % or more as fully busy. A name whose scale is known (``dcgm_scale``) takes it, and a different one
        set is refused; any other name needs one, refused when the settings load."""
        metric = info.data.get(str(info.field_name).removesuffix("_scale"))
        if metric is None:
            return value  # the name itself was refused
        known = dcgm_scale(metric)
        if value is None and known is None:
            raise ValueError(f"{metric} is not a DCGM field whose scale is known (DCGM_FI_PROF_* 0-1, "
                             "DCGM_FI_DEV_*_UTIL 0-100): set the reading that means fully busy, 1 for a ratio or "
                             "100 for a percentage")
        if value is not None and known is not None and value != known:
            raise ValueError(f"{metric} reads 0-{known:g}, not 0-{value:g}: leave the scale unset")
        return value

    @property
    def gpu_activity_full_scale(self) -> float:
        """What ``gpu_activity`` reads when fully busy: what its readings are divided by to read 0-1."""
        return self.gpu_activity_scale or dcgm_scale(self.gpu_activity) or 1.0

    @property
    def gpu_util_fallback_full_scale(self) -> float:
        """What ``gpu_util_fallback`` reads when fully busy: what its readings are divided by to read 0-1."""
        return self.gpu_util_fallback_scale or dcgm_scale(self.gpu_util_fallback) or 1.0

    @property
    def dcgm_matchers(self) -> tuple[LabelMatcher, ...]:
        """``dcgm_selector`` parsed: what every GPU series selector adds."""
        return label_matchers(self.dcgm_selector or "")

    @property
    def vllm_matchers(self) -> tuple[LabelMatcher, ...]:
        """``vllm_selector`` parsed: what every serving series selector adds."""
        return label_matchers(self.vllm_selector or "")

    @property
    def activity_names(self) -> str:
        """``A or B``: the activity metrics as a sentence names them, each once (both settings may name one)."""
        return " or ".join(dict.fromkeys([self.gpu_activity, self.gpu_util_fallback]))


class GpuaasSettings(BaseSettings):
    """Every value is checked when the settings load, naming its variable. A number must be finite
    (``allow_inf_nan=False``, here and in ``MetricNames``: ``inf``, ``nan``, ``1e400``) and within a range a
    fleet has: an infinite timeout would fail later, in every request's arithmetic, and a thousand retries
    would back off for days. A variable set to nothing (``GPUAAS_DATA_DIR=``) is unset (``env_ignore_empty``):
    read as a path it would be the current directory."""

    model_config = SettingsConfigDict(
        env_prefix="GPUAAS_", env_nested_delimiter="__", extra="forbid", frozen=True, allow_inf_nan=False,
        env_ignore_empty=True,
    )

    data_dir: Path = Field(default_factory=default_data_dir)
    """Where the SQLite store, the HTML reports and the embedded cluster live (``$XDG_DATA_HOME/gpuaas`` or
    ``~/.local/share/gpuaas``)."""
    database_url: Annotated[SecretStr, AfterValidator(check_database_url)] | None = None
    """SQLAlchemy URL; unset means SQLite at ``DATA_DIR/gpuaas.db``. PostgreSQL for a shared deployment. A SQLite URL
    names a file and takes no query options (an in-memory database would take the audit log with it)."""
    database_password: SecretStr | None = None
    """Put into ``database_url`` when that has none: the URL can live in plain config, the password in a secret. A
    different password in both is refused."""
    policy_file: Path | None = None
    """The policy YAML: what may be done (dry-run or apply, thresholds, caps); unset: dry-run everywhere."""

    kubeconfig: Path | None = None
    """Kubeconfig file; unset: ``~/.kube/config`` (or the service account with ``in_cluster``)."""
    kube_context: str | None = None
    """Context of the kubeconfig; unset: its current context."""
    in_cluster: bool = False
    """Use the pod's service account (a flow run as a Kubernetes Job)."""
    kube_page_size: Annotated[int, Field(gt=0, le=10000)] = 500
    """Objects per list request (``limit``): requests grow with pages, not with objects."""

    prometheus_url: HttpUrl = None
    """Prometheus with dcgm-exporter, Kueue and vLLM series, e.g. ``http://prometheus.monitoring.svc:9090``."""
    prometheus_token: Token = None
    """Bearer token for Prometheus (or the Prefect Secret block ``gpuaas-prometheus-token``); never logged."""
    prometheus_token_file: TokenFile = None
    """A file holding the Prometheus bearer token, read at every run, so a rotated service-account token
    (``/var/run/secrets/kubernetes.io/serviceaccount/token``) is picked up; instead of ``GPUAAS_PROMETHEUS_TOKEN``."""
    prometheus_headers: Headers = Field(default={})
    """Headers sent with every Prometheus query, as JSON, e.g. ``{"X-Scope-OrgID": "gpu-fleet"}`` for the tenant of a
    Grafana Mimir, Cortex or Thanos that serves several; values are treated as secrets."""
    opencost_url: HttpUrl = None
    """OpenCost's API, e.g. ``http://opencost.opencost.svc:9003``; unset: OpenCost's metrics in Prometheus."""
    opencost_token: Token = None
    """Bearer token for OpenCost's API behind an auth proxy (or the Prefect Secret block ``gpuaas-opencost-token``);
    never logged. OpenCost's metrics in Prometheus go with Prometheus's token."""
    opencost_token_file: TokenFile = None
    """A file holding the OpenCost bearer token, read at every run (a rotated token is picked up); instead of
    ``GPUAAS_OPENCOST_TOKEN``."""
    opencost_headers: Headers = Field(default={})
    """Headers sent with every request to OpenCost's API, as JSON, e.g. ``{"X-Api-Key": "..."}`` for a gateway that
    asks for one; values are treated as secrets."""
    opencost_currency: CurrencyCode = "USD"
    """The ISO 4217 code of OpenCost's prices (its custom pricing's or ``currencyCode``'s, e.g. ``EUR``, ``JPY``): the
    cost report writes its amounts in it (``€1,234.56``, ``¥1,235``, ``1,234.56 CHF``) and converts nothing."""
    pushgateway_url: HttpUrl = None
    """Pushgateway for Grafana and KEDA; unset: nothing is pushed. Behind basic auth, with its user (and password):
    ``http://gpuaas@pushgateway.monitoring.svc:9091``; the credentials are sent as a header, never shown."""
    pushgateway_password: SecretStr | None = None
    """The password of the user ``GPUAAS_PUSHGATEWAY_URL`` names: the URL can live in plain config, the password in
    a secret; never logged."""
    pushgateway_token: Token = None
    """Bearer token for a Pushgateway behind an auth proxy, instead of basic auth; never logged."""
    pushgateway_token_file: TokenFile = None
    """A file holding the Pushgateway bearer token, read at every push (a rotated token is picked up); instead of
    ``GPUAAS_PUSHGATEWAY_TOKEN``."""
    ca_file: CaBundle = None
    """PEM bundle of the CAs that sign the HTTPS sources' certificates (Prometheus, OpenCost, the Pushgateway),
    trusted instead of the system's, e.g. OpenShift's ``service-ca.crt``; unset: the system's trust store."""
    metrics: MetricNames = MetricNames()
    """Metric and label names, where an install renamed them (below)."""

    nvml: Literal["auto", "on", "off"] = "auto"
    """Sample this host's GPUs with NVML: ``auto`` where a driver is present (its absence is no fault)."""

    request_timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 30
    """Timeout of each request to a source or the API server (at most an hour), and of the kubeconfig's exec
    credential plugin, which the client would otherwise wait for without a limit. An answer of OpenCost's API
    must arrive whole within three of them (at most 512 MiB): one that trickles in fails its source."""
    retries: Annotated[int, Field(ge=0, le=10)] = 3
    """Retries of a transient failure (timeout, refused connection, 5xx, 429), at most 10; a permanent one fails at
    once."""
    retry_backoff_seconds: Annotated[float, Field(ge=0, le=60)] = 2
    """Factor of the exponential backoff between retries (2, 4, 8 s …, each up to half that again at random, so that
    runs retrying together spread out), at most 60, and no wait longer than 5 minutes; ``Retry-After`` is honoured."""
    writes_wait_seconds: Annotated[float, Field(ge=0, le=86400)] = 60
    """How long a writing flow waits for another one's cluster writes before it gives up, writing nothing."""
    writes_lease_seconds: Annotated[float, Field(gt=0, le=86400)] = 900
    """Lease of the cluster-writes locks: a killed holder's lock is taken over after this."""
    writes_slot_lease_seconds: Annotated[float, Field(ge=60, le=86400)] = 60
    """Lease of the Prefect slot, renewed by its live holder every 3/4 of it (Prefect's minimum is 60 s): a holder
    killed on another machine frees the slot this long after its last renewal, plus the server's repossessor loop."""

    @model_validator(mode="after")
    def _one_password(self) -> GpuaasSettings:
        """Two different database passwords are refused: the URL's would be sent, and a run that then fails to log
        in, after a rotated Secret, would leave no clue that GPUAAS_DATABASE_PASSWORD was never read."""
        if self.database_url is None or self.database_password is None:
            return self
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            in_url = make_url(self.database_url.get_secret_value()).password
        except ArgumentError:
            return self  # not a URL: its own check names it
        if in_url and in_url != self.database_password.get_secret_value():
            raise ValueError(f"GPUAAS_DATABASE_PASSWORD (or the Prefect Secret block "
                             f"{SECRET_BLOCKS['database_password']}) differs from the password in GPUAAS_DATABASE_URL: "
                             "keep the password in one of them (the URL's alone would be used)")
        return self

    @model_validator(mode="after")
    def _one_token(self) -> GpuaasSettings:
        for source in ("prometheus", "opencost"):
            problem = auth_problem(source, SECRET_BLOCKS[f"{source}_token"], getattr(self, f"{source}_token"),
                                   getattr(self, f"{source}_token_file"), getattr(self, f"{source}_headers"))
            if problem is not None:
                raise ValueError(problem)
        from gpuaas.pushgateway import auth_problem as pushgateway_problem  # imports this module: not at the top

        problem = pushgateway_problem(self.pushgateway_url, self.pushgateway_password, self.pushgateway_token,
                                      self.pushgateway_token_file)
        if problem is not None:
            raise ValueError(problem)
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """pydantic-settings' own order, then the Prefect Secret blocks: a set variable wins over a block."""
        return init_settings, env_settings, dotenv_settings, file_secret_settings, PrefectSecretBlocks(settings_cls)

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "gpuaas.db"

    @property
    def reports_dir(self) -> Path:
        return self.data_dir / "reports"

    @property
    def cluster_dir(self) -> Path:
        """Where the embedded cluster keeps its kubeconfig, Prometheus TSDB and state."""
        return self.data_dir / "cluster"

    @property
    def database_url_value(self) -> str:
        if self.database_url is not None:
            url = self.database_url.get_secret_value()
            if self.database_password is None:
                return url
            from sqlalchemy.engine import make_url

            parsed = make_url(url)
            if parsed.password:
                return url
            return parsed.set(password=self.database_password.get_secret_value()).render_as_string(hide_password=False)
        return f"sqlite:///{self.sqlite_path}"

    @property
    def database_variable(self) -> str:
        """The variable that chose the database, for a line that tells what to change: ``GPUAAS_DATABASE_URL``
        where it is set, else ``GPUAAS_DATA_DIR`` (the SQLite file in it)."""
        return "GPUAAS_DATABASE_URL" if self.database_url is not None else "GPUAAS_DATA_DIR"

    @property
    def policy_file_name(self) -> str:
        """The policy file as a line that tells what to fix names it: its name, ``policy.yaml`` where none is set."""
        return self.policy_file.name if self.policy_file else "policy.yaml"

    @cached_property
    def policy(self) -> Policy:
        """The validated policy; defaults (dry-run everywhere) when no file is configured."""
        return load_policy(self.policy_file) if self.policy_file else Policy()


def _variable(loc: tuple[int | str, ...]) -> str:
    """The variable a problem at ``loc`` is in, as the person set it: ``GPUAAS_METRICS__FB_USED``, then the place
    within its JSON value where it has one (``GPUAAS_METRICS__POD_LABELS[1]``, ``GPUAAS_PROMETHEUS_HEADERS['X-A']``):
    an item or a key of a value is no variable of its own."""
    model: Any = GpuaasSettings
    names: list[str] = []
    for i, part in enumerate(loc):
        if model is None or not isinstance(part, str):
            return "GPUAAS_" + "__".join(names) + "".join(f"[{p!r}]" for p in loc[i:])
        names.append(part.upper())
        field = model.model_fields.get(part)
        annotation = field.annotation if field is not None else None
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return "GPUAAS_" + "__".join(names)


def _misspelt_variable() -> str | None:
    """``misspelt_variable`` of the environment, against every variable the settings read."""
    read = [f"GPUAAS_{name.upper()}" for name in GpuaasSettings.model_fields]
    read += [f"GPUAAS_METRICS__{name.upper()}" for name in MetricNames.model_fields]
    return misspelt_variable(read, os.environ)


def load_settings(**overrides: object) -> GpuaasSettings:
    """Settings from the environment, with errors that name the variable; the policy is read eagerly."""
    misspelt = _misspelt_variable()
    if misspelt is not None:
        raise ConfigError(misspelt, file="environment")
    try:
        settings = GpuaasSettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            message = shown_message(err["msg"].removeprefix("Value error, "), err.get("input"))
            if not err["loc"]:  # a check across fields names its variables itself
                problems.append(message)
                continue
            problems.append(f"{_variable(tuple(err['loc']))}: {message}")
        raise ConfigError("; ".join(problems), file="environment") from exc
    except SettingsError as exc:  # a structured field (a list, a mapping) whose variable is not JSON
        match = re.search(r'field "([^"]+)"', str(exc))
        var = f"GPUAAS_{match.group(1).upper()}" if match else "a GPUAAS_ variable"
        raise ConfigError(f"{var} (or one of its {var}__ parts): not a valid value; a list or mapping is "
                          "written as JSON, e.g. '[\"pod\", \"exported_pod\"]'", file="environment") from None
    _ = settings.policy
    return settings
