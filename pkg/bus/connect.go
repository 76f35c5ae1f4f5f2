package bus

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/directget"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// Config says how to reach NATS and which fleet to join.
type Config struct {
	// URL of the NATS server(s), comma separated. Empty with an embedded
	// server.
	URL string
	// CredsFile is a NATS credentials file (JWT + nkey), optional.
	CredsFile string
	// TLS client settings, optional.
	TLS TLSConfig
	// Prefix of every subject and stream; see [subject.NewSpace].
	Prefix string
	// Domain is the JetStream domain to use (a leaf node's or hub's);
	// empty uses the server's own JetStream.
	Domain string
	// Name identifies the connection in server monitoring.
	Name string
}

// TLSConfig holds client TLS files.
type TLSConfig struct {
	CertFile string
	KeyFile  string
	CAFile   string
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var p config.Problems
	if _, err := subject.NewSpace(c.Prefix); err != nil {
		p.Add("nats.prefix", "%w", err)
	}
	switch {
	case c.TLS.CertFile != "" && c.TLS.KeyFile == "":
		p.Add("nats.tls.keyFile", "must be set with certFile")
	case c.TLS.CertFile == "" && c.TLS.KeyFile != "":
		p.Add("nats.tls.certFile", "must be set with keyFile")
	}
	return p.Err()
}

// CallTimeout bounds one bus call made under a longer context (a turn's
// lives for minutes): a request lost with a server that died must fail
// and be retried, not hold its caller until that context ends.
const CallTimeout = 10 * time.Second

// ConnectTimeout bounds one attempt to connect to a server (dial, TLS,
// the server's INFO), whatever longer deadline the caller gives: the
// connection keeps the bound for its reconnects, and a server that takes
// the TCP connection and never answers (a frozen node, an address that
// black-holes) holds the connection from the next server in the list for
// all of it.
const ConnectTimeout = 5 * time.Second

// PingInterval is how often a connection pings its server; the third
// ping that goes out with two unanswered declares the server gone, so a
// connection to one that froze or dropped off the network (no FIN, no
// RST) moves to another 6–9 s after. Not longer: a worker renews its
// lease every third of the TTL and gives a renewal up a fifth of the TTL
// before the lease may expire, so a node that freezes just as a renewal
// is due leaves 14 s (of the default 30 s TTL) to reconnect and renew;
// at 5 s a ping this took 10–15 s, and nats.go's default, 2 minutes,
// 4–6 minutes.
const PingInterval = 3 * time.Second

// Bus is a connection to the fleet's NATS with JetStream.
type Bus struct {
	NC    *nats.Conn
	JS    jetstream.JetStream
	Space subject.Space
	// Direct reads stream messages by direct get on NC.
	Direct *directget.Reader
}

// Connect dials NATS. Extra options (e.g. [Embedded.ConnectOption],
// [LogAsyncErrors]) are applied after the configured ones; without
// LogAsyncErrors asynchronous errors are discarded, not printed to stderr.
func Connect(ctx context.Context, cfg Config, extra ...nats.Option) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	space, _ := subject.NewSpace(cfg.Prefix)
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.PingInterval(PingInterval),
		nats.MaxPingsOutstanding(2),
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLS.CertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.TLS.CertFile, cfg.TLS.KeyFile))
	}
	if cfg.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLS.CAFile))
	}
	opts = append(opts, LogAsyncErrors(nil))
	opts = append(opts, extra...)
	url := cfg.URL
	if url == "" {
		url = nats.DefaultURL
	}
	timeout := ConnectTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	opts = append(opts, nats.Timeout(timeout))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", url, err)
	}
	var js jetstream.JetStream
	if cfg.Domain != "" {
		js, err = jetstream.NewWithDomain(nc, cfg.Domain)
	} else {
		js, err = jetstream.New(nc)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Bus{NC: nc, JS: js, Space: space, Direct: directget.NewReader(nc, directget.WithDomain(cfg.Domain))}, nil
}

// LogAsyncErrors is a [Connect] option that logs the connection's
// asynchronous errors (e.g. a watcher whose consumer went away) to l at
// debug level; nil discards them.
func LogAsyncErrors(l *slog.Logger) nats.Option {
	l = observe.OrDiscard(l)
	return nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		subj := ""
		if sub != nil {
			subj = sub.Subject
		}
		l.Debug("nats async error", "subject", subj, "err", err)
	})
}

// Close flushes the connection, so that what was published and acked on
// it reached the server, and closes it. Every part using it must have
// stopped first: a message still queued for one of its subscriptions is
// dropped (JetStream redelivers it), where a drain would run it through
// the handler of a part that is gone, and would poll every 10 ms until the
// subscriptions are gone (20 ms of every one-shot's shutdown).
func (b *Bus) Close() {
	// A failed flush (a server gone) leaves nothing else to do: closing
	// is all that is left.
	if b.flushesOnClose() {
		_ = b.NC.FlushTimeout(5 * time.Second)
	}
	b.NC.Close()
}

// flushesOnClose says whether Close flushes first. While reconnecting,
// the flush waits up to its 5 s for the server to be back: worth it when
// something waits in the reconnect buffer (a tool's last result, a stop
// request), not when nothing does (a CLI leaving after its fleet stopped
// took 5.0 s to exit).
func (b *Bus) flushesOnClose() bool {
	n, err := b.NC.Buffered()
	return b.NC.IsConnected() || (err == nil && n > 0)
}
