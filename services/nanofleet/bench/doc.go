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
// idle RSS of every binary and, in the all-in-one and the multi-process
// fleet (memory-consolidator included), the resident cost of an idle
// session and RSS growth with turns at a fixed session count. A
// session's unconsolidated history, which every turn loads and sends to
// the model, is bounded by consolidation, not by its number of turns: the
// memory suite's turns therefore run with answers of a realistic length
// and a stated context window (Config.TurnsContextWindow), so that the
// consolidator keeps every session at the steady state a long
// conversation reaches before the first reading, and the suite reports
// the unconsolidated turns per session it found at each reading.
//
// [Run] measures; [Write] renders the [Report] as Markdown, JSON and an
// SVG plot. A scenario that fails is recorded in the report and the run
// goes on. The bench is Linux-only: it reads /proc.
package bench
