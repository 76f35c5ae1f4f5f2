// Package dashboard serves the fleet dashboard from the gateway's HTTP
// listener at /dashboard: the workers and tool runners online (micro
// discovery), the turns in flight and queued, every stream's size and its
// consumers' lag, the recent turns with their tool calls and timings, and
// the dead letters — updating live.
//
// Access is the web chat's: the page takes the same login link
// (/dashboard?token=…) and the same cookie, checked through a [Gate] that
// the web chat's server implements. Everything under /dashboard/api/ needs
// the login; the page's static files do not.
//
// The page holds one WebSocket (/dashboard/api/live) and receives a whole
// [Snapshot] as JSON every [Config.Interval], and shortly after a turn is
// committed or a message dead-lettered (the socket listens on the history
// and dead-letter subjects). /dashboard/api/snapshot returns one snapshot
// for scripts.
//
// Work per snapshot is bounded and shared: one build runs at a time for all
// open pages, a snapshot younger than half the interval is reused, and
// the recent turns and dead letters are kept between builds so that each
// build reads only the records stored since the last (see
// [fleetstatus.Recent]). A build costs an info request per stream, a
// consumer list per stream, one discovery ping (waiting
// [Config.DiscoverWait]) and a direct get per page of new records.
package dashboard
