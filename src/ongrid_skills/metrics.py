"""Prometheus metrics of one manager, in a collector registry of their own.

Never the ``prometheus_client`` global registry: two managers in one process (tests, an embedder)
would collide on it. This module only counts; it must never read the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from ongrid_skills.skills.registry import Registry


class Metrics:
    """The manager's counters and gauges, rendered for ``GET /metrics``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.executions = Counter(
            "ongrid_executions",
            "Executions by skill and final status.",
            ["skill", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "ongrid_execution_duration_seconds",
            "Wall-clock duration of executions that ran.",
            ["skill"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=self.registry,
        )
        self.running = Gauge(
            "ongrid_executions_running", "Executions running now.", registry=self.registry
        )
        self.queued = Gauge(
            "ongrid_executions_queued",
            "Executions waiting for a slot.",
            registry=self.registry,
        )
        self.busy = Counter(
            "ongrid_executions_rejected_busy",
            "Execute requests refused because the queue was full.",
            registry=self.registry,
        )
        self.pending_approvals = Gauge(
            "ongrid_pending_approvals", "Approval requests waiting.", registry=self.registry
        )
        self.skills = Gauge(
            "ongrid_skills_loaded", "Skills in the registry.", registry=self.registry
        )
        self.loader_errors = Gauge(
            "ongrid_loader_errors",
            "Manifests refused by the last load.",
            registry=self.registry,
        )

        # Edge workers (docs/fleet.md), one series per host this manager has seen.
        self.host_online = Gauge(
            "ongrid_host_online", "1 while the host's heartbeat arrives.", ["host"],
            registry=self.registry,
        )  # fmt: skip
        self.host_heartbeat = Gauge(
            "ongrid_host_last_heartbeat_timestamp_seconds",
            "When the host last announced itself (its clock).",
            ["host"],
            registry=self.registry,
        )
        self.host_skills = Gauge(
            "ongrid_host_skills", "Host skills the host announces.", ["host"],
            registry=self.registry,
        )  # fmt: skip
        self.host_running = Gauge(
            "ongrid_host_running_calls",
            "Calls the host runs, by its last heartbeat (every manager's).",
            ["host"],
            registry=self.registry,
        )
        self.host_calls = Counter(
            "ongrid_host_calls",
            "Calls this manager handed to the host, by final status.",
            ["host", "status"],
            registry=self.registry,
        )
        self.host_call_duration = Histogram(
            "ongrid_host_call_duration_seconds",
            "Manager-side duration of the host's calls, dispatch to outcome.",
            ["host"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=self.registry,
        )

    def host_seen(self, host: dict[str, Any]) -> None:
        """Set a host's gauges from its ``GET /v1/hosts`` view."""
        name = host["host"]
        self.host_online.labels(name).set(1 if host["online"] else 0)
        self.host_heartbeat.labels(name).set(host["last_heartbeat"])
        self.host_skills.labels(name).set(host["skill_count"])
        self.host_running.labels(name).set(host["running_calls"])

    def host_call(self, host: str, status: str, duration_ms: float | None) -> None:
        """Count a call handed to a host (or refused for it) once its record is final."""
        self.host_calls.labels(host, status).inc()
        if duration_ms is not None:
            self.host_call_duration.labels(host).observe(duration_ms / 1000)

    def finished(self, skill: str, status: str, duration_ms: float | None) -> None:
        """Count a call that ended; ``duration_ms`` is None when it never ran (refused, void)."""
        self.executions.labels(skill, status).inc()
        if duration_ms is not None:
            self.duration.labels(skill).observe(duration_ms / 1000)

    def rejected_busy(self) -> None:
        self.busy.inc()

    def loaded(self, registry: Registry) -> None:
        """Set the skill and loader-error gauges from a freshly built registry."""
        self.skills.set(len(registry))
        self.loader_errors.set(len(registry.report.errors))

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
