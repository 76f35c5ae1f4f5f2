// Package fleetdir keeps one fleet per data directory. The process that
// runs an embedded NATS server on a data directory holds an exclusive
// lock on it (flock on fleet.lock, released by the kernel when the process
// dies) and writes beside it, in fleet.json, who it is and where its
// server listens. Every other process on the machine finds that fleet and
// joins it instead of opening the same JetStream store, which two servers
// would corrupt.
//
// The embedded server's credentials live in the same directory
// (nats-credentials.json, mode 0600), generated at first start, so that
// only the user who owns the data directory can reach the fleet.
package fleetdir

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

const (
	lockName  = "fleet.lock"
	infoName  = "fleet.json"
	credsName = "nats-credentials.json"
	// user is the embedded server's only user.
	user = "nanofleet"
)

// Info is what the lock's holder says about itself in fleet.json.
type Info struct {
	PID int `json:"pid"`
	// Command is the holder's nanofleet command: "run", "agent", "chat".
	Command string `json:"command"`
	// NATSURL is where the embedded server accepts other processes,
	// without credentials; empty while starting and for a fleet that
	// accepts in-process connections only.
	NATSURL string    `json:"natsUrl,omitempty"`
	Started time.Time `json:"started"`
}

// String names the holder for messages: "nanofleet run (pid 42, NATS at …)".
func (i Info) String() string {
	s := fmt.Sprintf("nanofleet %s (pid %d", i.Command, i.PID)
	if i.NATSURL != "" {
		s += ", NATS at " + i.NATSURL
	}
	return s + ")"
}

// Credentials are the embedded server's user and password.
type Credentials struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// URL returns base (a nats:// URL) with the credentials in it, the form
// every NATS client accepts.
func (c Credentials) URL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("nats url %q: %w", base, err)
	}
	u.User = url.UserPassword(c.User, c.Password)
	return u.String(), nil
}

// Lock is a held data directory.
type Lock struct {
	dir  string
	file *os.File
}

// Acquire creates dir if needed and takes its lock without waiting. When
// another process holds it, the error is a [*LockedError] naming that
// process.
func Acquire(dir string) (*Lock, error) {
	// The parent (~/.nanofleet) holds the workspace too, which the
	// sandbox's user must be able to reach; only the store is private.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	// [Find] holds a shared lock for an instant to see whether anyone
	// runs; that is not a fleet, so try a few more times.
	for i := 0; i < 10 && errors.Is(err, syscall.EWOULDBLOCK); i++ {
		time.Sleep(10 * time.Millisecond)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			info, _ := readInfo(dir)
			return nil, &LockedError{Dir: dir, Info: info}
		}
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	// A fleet.json left by a process that died says nothing true.
	if err := os.Remove(filepath.Join(dir, infoName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = f.Close()
		return nil, fmt.Errorf("remove stale %s: %w", infoName, err)
	}
	return &Lock{dir: dir, file: f}, nil
}

// Dir is the locked data directory.
func (l *Lock) Dir() string { return l.dir }

// Publish writes info to fleet.json, replacing it whole.
func (l *Lock) Publish(info Info) error {
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(l.dir, infoName), data)
}

// Credentials returns the embedded server's credentials, generating them
// at first start.
func (l *Lock) Credentials() (Credentials, error) {
	path := filepath.Join(l.dir, credsName)
	c, err := readCredentials(path)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return Credentials{}, err
	}
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return Credentials{}, fmt.Errorf("generate nats password: %w", err)
	}
	c = Credentials{User: user, Password: hex.EncodeToString(secret)}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return Credentials{}, err
	}
	if err := writeFile(path, data); err != nil {
		return Credentials{}, err
	}
	return c, nil
}

// Release removes fleet.json and lets the lock go.
func (l *Lock) Release() {
	_ = os.Remove(filepath.Join(l.dir, infoName))
	_ = l.file.Close() // closing the only descriptor releases the flock
}

// Running is a fleet found on a data directory.
type Running struct {
	Info        Info
	Credentials Credentials
}

// URL is the fleet's NATS URL with its credentials.
func (r *Running) URL() (string, error) { return r.Credentials.URL(r.Info.NATSURL) }

// Find returns the fleet running on dir: [ErrNotRunning] when no process
// holds its lock. A holder that is still starting is waited for until ctx
// ends; one that accepts no other process (an in-process fleet of
// `nanofleet chat`) is an error naming it.
func Find(ctx context.Context, dir string) (*Running, error) {
	f, err := os.Open(filepath.Join(dir, lockName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotRunning, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotRunning, dir)
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := readInfo(dir)
		switch {
		case err == nil && info.NATSURL != "":
			creds, err := readCredentials(filepath.Join(dir, credsName))
			if err != nil {
				return nil, fmt.Errorf("credentials of %s: %w", info, err)
			}
			return &Running{Info: *info, Credentials: creds}, nil
		case err == nil && info.Command != "run":
			return nil, fmt.Errorf("%s holds %s with an in-process fleet that other processes cannot join; stop it, or start the fleet with `nanofleet run`", info, dir)
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return nil, err
		}
		select {
		case <-ctx.Done():
			if info != nil {
				return nil, fmt.Errorf("%s on %s is still starting: %w", info, dir, ctx.Err())
			}
			return nil, fmt.Errorf("a process holds %s but has not said where it listens: %w", filepath.Join(dir, lockName), ctx.Err())
		case <-tick.C:
		}
	}
}

func readInfo(dir string) (*Info, error) {
	data, err := os.ReadFile(filepath.Join(dir, infoName))
	if err != nil {
		return nil, err
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, infoName), err)
	}
	return &info, nil
}

func readCredentials(path string) (Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Credentials{}, err
	}
	var c Credentials
	if err := json.Unmarshal(data, &c); err != nil {
		return Credentials{}, fmt.Errorf("%s: %w", path, err)
	}
	if c.User == "" || c.Password == "" {
		return Credentials{}, fmt.Errorf("%s: user and password must be set (delete the file to generate new ones)", path)
	}
	return c, nil
}

// writeFile writes data to path with mode 0600, atomically: readers see
// the old file or the new one, never half of one.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
