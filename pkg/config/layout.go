package config

// MinWindowSeconds is the shortest duplicate window a stream may have
// (nats.duplicateWindowSeconds, nats.replayWindowSeconds): longer than
// the 40 s over which bus.PublishMsg may send a message again
// (bus.ResendSpan), so that every resend is recognised.
const MinWindowSeconds = 60

// Bounds of the nats keys LayoutLimits.Check checks, in seconds.
const (
	maxLeaseTTLSeconds = 3600
	maxWindowSeconds   = 86400
)

// LayoutLimits are the values of the nats section that bus.Layout holds
// too, in the file's units. The file's keys and a layout built in code are
// checked by one Check, so that both take the same values and name a bad
// one alike (pkg/bus imports this package, not the other way round). The
// file's integers are taken as they are: converted to a time.Duration
// first, a number of seconds beyond int64's nanoseconds would wrap around
// and could land in range.
type LayoutLimits struct {
	Replicas               int
	LeaseTTLSeconds        float64
	DuplicateWindowSeconds float64
	ReplayWindowSeconds    float64
}

// Check adds to p a problem, named by its key in the config file, for
// every value of l out of its range.
func (l LayoutLimits) Check(p *Problems) {
	if l.Replicas < 1 || l.Replicas > 5 {
		p.Add("nats.replicas", "must be 1..5, got %d", l.Replicas)
	}
	lease, dup, replay := l.LeaseTTLSeconds, l.DuplicateWindowSeconds, l.ReplayWindowSeconds
	leaseOK := lease >= 1 && lease <= maxLeaseTTLSeconds
	if !leaseOK {
		p.Add("nats.leaseTtlSeconds", "must be 1..%d, got %g", maxLeaseTTLSeconds, lease)
	}
	if dup < MinWindowSeconds || dup > maxWindowSeconds {
		p.Add("nats.duplicateWindowSeconds", "must be %d..%d (a publish is sent again for up to 40 s, and a resend after the window would be stored twice), got %g", MinWindowSeconds, maxWindowSeconds, dup)
	}
	// Measured against a lease TTL that is itself valid.
	if (leaseOK && replay < 2*lease) || replay < MinWindowSeconds || replay > maxWindowSeconds {
		p.Add("nats.replayWindowSeconds", "must be at least %d, at least twice nats.leaseTtlSeconds (%g) and at most %d, got %g", MinWindowSeconds, 2*lease, maxWindowSeconds, replay)
	}
}
