// Package deploy holds what it takes to run nanofleet outside one process:
// the container images (docker/), the NATS cluster configuration (nats/),
// the Helm chart (helm/nanofleet), Prometheus and Grafana provisioning
// (prometheus/, grafana/) and the compose files at the repository root.
//
// None of it can run on the build machines (there is no container engine),
// so this package's tests check it with the tools' own Go libraries:
// compose-go loads the compose files, Helm renders the chart and every
// object is decoded strictly into its Kubernetes API type, BuildKit parses
// and lints the Dockerfile, nats-server loads the NATS configuration, and
// Prometheus' parser reads every query of the dashboard and the alerts.
// They also check that the pieces agree with each other and with the code:
// ports, labels, stream names, metric names.
//
// See README.md in this directory for how to deploy.
package deploy
