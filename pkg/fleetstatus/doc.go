// Package fleetstatus reads what a fleet is doing from NATS, for operators:
// the size and sequence range of its streams, the backlog of their
// consumers (pending, in flight, redelivered), the services that answer
// micro discovery ($SRV.PING), and the most recent turn records and dead
// letters, summarised.
//
// Everything here only reads: streams are inspected with info requests and
// batched direct gets, never with consumers, so looking does not change
// the fleet. [Get] and [Discover] give one snapshot; [Recent] keeps the
// last records of a stream across calls and reads only what is new, so a
// page that refreshes every second costs a few requests per refresh
// however long the history is.
//
// `nanofleet status` and the gateway's fleet dashboard are built on it.
package fleetstatus
