package embeddednats

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/observe"
)

// Config configures a nats-server started inside the process.
type Config struct {
	// StoreDir is where JetStream keeps its files. Required.
	StoreDir string
	// Host and Port to listen on for other processes (nanofleet status,
	// services started with --nats). Port -1 picks a free port; NoListen
	// accepts in-process connections only.
	Host     string
	Port     int
	NoListen bool
	// ServerName names the server in logs and cluster views.
	ServerName string
	// MaxMemory and MaxStore bound JetStream's memory and disk use; 0
	// leaves the server's defaults.
	MaxMemory int64
	MaxStore  int64
	// User and Password, when set, are required of every client, the
	// in-process ones included. A server that listens on a socket should
	// have them: without, any local user could read and publish the
	// fleet's messages.
	User     string
	Password string
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.StoreDir == "" {
		return errors.New("embedded nats: storeDir is required")
	}
	if c.Port < -1 || c.Port > 65535 {
		return config.Invalid("nats.port", "%d out of range", c.Port)
	}
	if (c.User == "") != (c.Password == "") {
		return errors.New("embedded nats: user and password go together")
	}
	return nil
}

// Server is a running in-process nats-server with JetStream.
type Server struct {
	srv            *server.Server
	noListen       bool
	js             server.JetStreamConfig // as started, for RestartJetStream
	user, password string
}

// Option changes how [Start] starts the server.
type Option func(*options)

type options struct {
	log *slog.Logger // nil: the server logs nothing
}

// WithLogger makes the server log to l (its notices at debug level); the
// default, and nil, log nothing.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = observe.OrDiscard(l) }
}

// Start starts a nats-server with JetStream and waits until it
// accepts connections.
func Start(cfg Config, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	name := cfg.ServerName
	if name == "" {
		name = "nanofleet-embedded"
	}
	so := &server.Options{
		ServerName:         name,
		Host:               host,
		Port:               cfg.Port,
		DontListen:         cfg.NoListen,
		JetStream:          true,
		StoreDir:           cfg.StoreDir,
		JetStreamMaxMemory: cfg.MaxMemory,
		JetStreamMaxStore:  cfg.MaxStore,
		NoSigs:             true,
		MaxPayload:         8 << 20,
		Username:           cfg.User,
		Password:           cfg.Password,
	}
	if cfg.Password != "" {
		// The server keeps only a hash; the cheapest cost keeps each
		// client's login fast, and the password is random, not a person's.
		hash, err := bcrypt.GenerateFromPassword([]byte(cfg.Password), bcrypt.MinCost)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: hash password: %w", err)
		}
		so.Password = string(hash)
	}
	if !cfg.NoListen && cfg.Port > 0 {
		// A taken port is the likeliest failure (another fleet or NATS
		// server on 4222): name it with the error's own type.
		addr := net.JoinHostPort(host, strconv.Itoa(cfg.Port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: %w", err) // names the address
		}
		_ = l.Close()
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if err := RunServer(srv, o.log, 30*time.Second); err != nil {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	js := srv.JetStreamConfig()
	if js == nil {
		srv.Shutdown()
		return nil, errors.New("embedded nats: jetstream did not start")
	}
	// Enable appends "jetstream" to the store dir it is given, and the
	// server's copy already has it: keep the dir we started with.
	js.StoreDir = cfg.StoreDir
	return &Server{srv: srv, noListen: cfg.NoListen, js: *js, user: cfg.User, password: cfg.Password}, nil
}

// StoreUsage reports the bytes JetStream stores and the server's limit
// (by default most of the disk it found at start).
func (e *Server) StoreUsage() (used, limit int64, err error) {
	info, err := e.srv.Jsz(nil)
	if err != nil {
		return 0, 0, fmt.Errorf("embedded nats: jetstream usage: %w", err)
	}
	return int64(info.Store), info.Config.MaxStore, nil
}

// RestartJetStream disables and re-enables JetStream, which reopens every
// stream from disk. A stream whose write failed (a full disk) keeps
// refusing writes until then, and a server that ran out of resources may
// have disabled JetStream altogether; client connections stay up.
func (e *Server) RestartJetStream() error {
	if e.srv.JetStreamEnabled() {
		if err := e.srv.DisableJetStream(); err != nil {
			return fmt.Errorf("embedded nats: disable jetstream: %w", err)
		}
	}
	cfg := e.js
	if err := e.srv.EnableJetStream(&cfg); err != nil {
		return fmt.Errorf("embedded nats: enable jetstream: %w", err)
	}
	return nil
}

// ClientURL is the URL other processes connect to, without credentials;
// empty with NoListen.
func (e *Server) ClientURL() string {
	if e.noListen {
		return ""
	}
	return e.srv.ClientURL()
}

// ConnectOption makes a nats connection go straight into the embedded
// server without a socket, with the server's credentials.
func (e *Server) ConnectOption() nats.Option {
	return func(o *nats.Options) error {
		if err := nats.InProcessServer(e.srv)(o); err != nil {
			return err
		}
		if e.user != "" {
			return nats.UserInfo(e.user, e.password)(o)
		}
		return nil
	}
}

// NATSServer exposes the nats-server for tests and status pages.
func (e *Server) NATSServer() *server.Server { return e.srv }

// Shutdown stops the server and waits until it is down. JetStream stops
// first, on its own: the server's Shutdown would otherwise tell every pull
// request still pending that the server is going (ours outlive the parts
// that made them, as a pull cannot be taken back) and then sleep 50 ms
// for the notices to get out, to clients it disconnects a moment later.
func (e *Server) Shutdown() {
	// An error leaves JetStream to the server's Shutdown.
	_ = e.srv.ShutdownJetStream()
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// RunServer starts srv, its log going to log (nil discards it), and
// waits up to timeout until it takes connections. A fatal error the
// server logs, such as a port it cannot listen on, ends the wait at once
// and is returned; the caller shuts srv down after an error.
func RunServer(srv *server.Server, log *slog.Logger, timeout time.Duration) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fatal := make(chan string, 1)
	srv.SetLoggerV2(&serverLogger{log: log.With("component", "nats-server"), fatal: fatal}, false, false, false)
	go srv.Start()
	deadline := time.Now().Add(timeout)
	for !srv.ReadyForConnections(50 * time.Millisecond) {
		select {
		case msg := <-fatal:
			return errors.New(msg)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready for connections after %s", timeout)
		}
	}
	return nil
}

// serverLogger adapts slog to the nats-server logger interface, and
// passes the first fatal error on to fatal.
type serverLogger struct {
	log   *slog.Logger
	fatal chan<- string
}

func (l *serverLogger) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg)
	select {
	case l.fatal <- msg:
	default:
	}
}
func (l *serverLogger) Errorf(format string, v ...any) { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Debugf(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Tracef(format string, v ...any) {}
