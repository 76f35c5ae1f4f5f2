// Package deploy holds what it takes to run nanofleet outside one process:
// the container images (docker/), the NATS cluster configuration (nats/),
// the Helm chart (helm/nanofleet), Prometheus and Grafana provisioning
// (prometheus/, grafana/) and the compose files at the repository root.
//
// This package's tests check it with the tools' own Go libraries, without a
// container engine: compose-go loads the compose files, Helm renders the
// chart and every object is decoded strictly into its Kubernetes API type
// and validated against the Kubernetes OpenAPI schemas, BuildKit parses and
// lints the Dockerfile, nats-server loads the NATS configuration, and
// Prometheus loads its config and rules and parses every query of the
// dashboard and the alerts. They also check that the pieces agree with each
// other and with the code: ports, labels, stream names, metric names, the
// nats-server version.
//
// TestComposeUp (make compose-test) runs docker-compose.yml for real, on a
// dockerd it starts if need be, with base images made offline by offline/.
//
// See README.md in this directory for how to deploy.
package deploy
