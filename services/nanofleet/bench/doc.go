// Package bench is the load bench behind cmd/bench (`make bench`): it drives the
// real fleet — all-in-one in this process, or a nats-server process, a
// tool-runner process and K agent-worker processes — straight onto the
// inbound subject with N concurrent sessions × M turns, against a fake
// OpenAI-compatible model with a configurable latency and an optional
// read_file per turn.
//
// Each scenario reports turns/s, latency from inbound publish to final
// reply (p50/p95/p99), bus overhead (latency minus the model's configured
// time), every process's peak RSS (VmHWM) and CPU (utime+stime from
// /proc), and for all-in-one scenarios the same turns run through the
// agent loop alone, without NATS, as a baseline. Two more suites read the
// idle RSS of every binary and the all-in-one's RSS after a small and a
// large number of turns over many sessions.
//
// [Run] measures; [Write] renders the [Report] as Markdown, JSON and an
// SVG plot. A scenario that fails is recorded in the report and the run
// goes on. The bench is Linux-only: it reads /proc.
package bench
