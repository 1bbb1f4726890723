"""The served app's own metrics, exported by Ray beside Serve's built-in ones (Prometheus format).

Per route and method (the model of an OpenAI request, the `method` of the app's own routes): requests by status,
refusals by status (4xx and 5xx answers: bad input, overload, deadlines), and a latency histogram. Ray exposes every
node's metrics on its metrics export port (`ray start --metrics-export-port=8080`; Prometheus scrapes
`http://<node>:8080/metrics`, or the service discovery file Ray writes at /tmp/ray/prom_metrics_service_discovery.json);
the names below get Ray's `ray_` prefix there.
"""

from __future__ import annotations

#: Where a route handler leaves the method a request used, for the guard to tag its metrics with (request.state).
METHOD_STATE = "t2rag_method"
#: Latency buckets in seconds: retrievals take milliseconds, answers seconds to minutes.
LATENCY_BOUNDARIES = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]


class RequestMetrics:
    """Counters and a histogram in Ray's metrics (created once per replica)."""

    def __init__(self, routes: set[str]) -> None:
        from ray.serve import metrics

        self.routes = routes  # anything else is counted as "other": a path is not a label of unbounded values
        tags = ("route", "method", "status")
        self.requests = metrics.Counter("t2rag_requests", description="requests answered", tag_keys=tags)
        self.refusals = metrics.Counter(
            "t2rag_refusals", description="requests answered with a 4xx or 5xx status", tag_keys=tags
        )
        self.latency = metrics.Histogram(
            "t2rag_request_latency_s",
            description="seconds from a request's arrival to its answer (a stream: to its last byte)",
            boundaries=LATENCY_BOUNDARIES,
            tag_keys=("route", "method"),
        )

    def record(self, route: str, method: str, status: int, seconds: float) -> None:
        route = route if route in self.routes else "other"
        tags = {"route": route, "method": method, "status": str(status)}
        self.requests.inc(1, tags)
        if status >= 400:
            self.refusals.inc(1, tags)
        self.latency.observe(seconds, {"route": route, "method": method})
