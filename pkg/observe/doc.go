// Package observe gives every nanofleet service the same eyes: one
// definition of the fleet's Prometheus metrics ([NewMetrics]) and a small
// HTTP server ([NewServer]) for /metrics, /healthz and /readyz.
//
// The server is meant for the operator port (--http, :9090 by default), not
// for user traffic:
//
//   - GET /metrics serves the registry given to [NewServer] in the Prometheus
//     text or OpenMetrics format.
//   - GET /healthz answers 200 while the process can serve HTTP at all; it
//     is the liveness probe and never calls out.
//   - GET /readyz calls the service's readiness function with a deadline of
//     [ReadyTimeout] and answers 200, or 503 with the error text. A service
//     that drains after SIGTERM reports not ready from its readiness
//     function (svc.Observability does), so that load balancers stop
//     sending work, while /metrics and /healthz keep answering until
//     [Server.Run]'s context ends.
//
// [Metrics] is registered once per registry. The all-in-one binary runs the
// four services in one process and hands them the same *Metrics.
//
// [OrDiscard] is what every WithLogger option of the fleet stores: a nil
// logger discards.
package observe
