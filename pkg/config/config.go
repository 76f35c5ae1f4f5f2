// Package config loads nanofleet's configuration file: one JSON document in
// nanobot's shape (camelCase keys, `${VAR}` placeholders), read by every
// service.
//
// The sections every service shares (nats, agents, providers) are typed
// here. A section that belongs to one service (tools, channels, memory,
// gateway, worker) stays raw until that service decodes it with
// [File.Section] into its own Config type, so no package imports the whole
// tree. Decoding is strict: an unknown or mistyped key fails start-up with
// the key's full path.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nanofleet/nanofleet/pkg/subject"
)

// File is a loaded configuration file.
type File struct {
	// Path the file was read from; empty when built from defaults.
	Path      string
	NATS      NATS                `json:"nats"`
	Agents    Agents              `json:"agents"`
	Providers map[string]Provider `json:"providers"`
	// Observability is the listener of /metrics, /healthz and /readyz.
	Observability Observability `json:"observability"`

	// Sections owned by one service each, decoded by [File.Section].
	Worker   json.RawMessage `json:"worker,omitempty"`
	Tools    json.RawMessage `json:"tools,omitempty"`
	Channels json.RawMessage `json:"channels,omitempty"`
	Memory   json.RawMessage `json:"memory,omitempty"`
	// Gateway is nanobot's gateway section, refused key by key (see
	// gatewaySection).
	Gateway  json.RawMessage `json:"gateway,omitempty"`
	Schedule json.RawMessage `json:"schedule,omitempty"`
}

// NATS says where the fleet's NATS is.
type NATS struct {
	// URL of an external NATS; empty runs an embedded server (all-in-one).
	URL       string `json:"url,omitempty"`
	CredsFile string `json:"credsFile,omitempty"`
	TLS       struct {
		CertFile string `json:"certFile,omitempty"`
		KeyFile  string `json:"keyFile,omitempty"`
		CAFile   string `json:"caFile,omitempty"`
	} `json:"tls"`
	Prefix string `json:"prefix,omitempty"`
	// Domain is the JetStream domain the fleet's streams live in, for a
	// fleet that reaches them through a leaf node; empty: the server's own.
	Domain   string `json:"domain,omitempty"`
	Replicas int    `json:"replicas,omitempty"`
	// LeaseTTLSeconds is how long a crashed worker's session lease keeps
	// the session blocked before another worker may take it over.
	LeaseTTLSeconds int `json:"leaseTtlSeconds,omitempty"`
	// DuplicateWindowSeconds: a platform event received twice within it
	// is handled once. The server holds each id of the window in memory.
	// At least MinWindowSeconds.
	DuplicateWindowSeconds int `json:"duplicateWindowSeconds,omitempty"`
	// ReplayWindowSeconds: a reply or turn record a worker publishes again
	// when it replays a committed turn is stored once within it; at least
	// twice leaseTtlSeconds and MinWindowSeconds.
	ReplayWindowSeconds int `json:"replayWindowSeconds,omitempty"`
	// BlobsMaxMB bounds the object store of attachments and oversize tool
	// output, which tools fill at a model's will, so that a session
	// cannot fill the store every conversation needs. 0: a quarter of the
	// embedded server's store, at most 1 GiB; no bound on an external
	// server, whose store the operator sized.
	BlobsMaxMB int `json:"blobsMaxMB,omitempty"`
	// Embedded server listen address, for other processes to join.
	Host string `json:"host,omitempty"`
	Port int    `json:"port,omitempty"`
}

// Observability says where /metrics, /healthz and /readyz are served.
type Observability struct {
	// Listen is the address; empty leaves the command's default, and a
	// --http flag overrides it.
	Listen string `json:"listen,omitempty"`
}

// Agents holds the agent defaults, as nanobot's agents.defaults.
type Agents struct {
	Defaults AgentDefaults `json:"defaults"`
}

// AgentDefaults are the model and loop settings of the agent.
type AgentDefaults struct {
	Workspace string `json:"workspace,omitempty"`
	Model     string `json:"model,omitempty"`
	// Provider names the entry of providers to use; "" or nanobot's
	// "auto" infers it from the model name.
	Provider            string   `json:"provider,omitempty"`
	MaxTokens           int      `json:"maxTokens,omitempty"`
	Temperature         float32  `json:"temperature,omitempty"`
	MaxToolIterations   int      `json:"maxToolIterations,omitempty"`
	ContextWindowTokens int      `json:"contextWindowTokens,omitempty"`
	Timezone            string   `json:"timezone,omitempty"`
	FallbackModels      []string `json:"fallbackModels,omitempty"`
}

// Provider is one model host's credentials.
type Provider struct {
	APIKey       string            `json:"apiKey,omitempty"`
	APIBase      string            `json:"apiBase,omitempty"`
	ExtraHeaders map[string]string `json:"extraHeaders,omitempty"`
	// MaxConcurrent bounds the model calls in flight from each worker
	// process; 0 takes the provider's default, -1 means no bound.
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
	// APIType is nanobot's choice of request API: only its default,
	// "auto", is taken (nanofleet speaks chat completions).
	APIType string `json:"apiType,omitempty"`
}

// Defaults returns the configuration used when no file exists.
func Defaults() *File {
	return &File{
		NATS: NATS{Prefix: "nanofleet", Replicas: 1, Host: "127.0.0.1", Port: 4222, LeaseTTLSeconds: 30,
			DuplicateWindowSeconds: 600, ReplayWindowSeconds: 120},
		Agents: Agents{Defaults: AgentDefaults{
			Workspace:           "~/.nanofleet/workspace",
			Model:               "gpt-4o-mini",
			MaxTokens:           8192,
			Temperature:         0.1,
			MaxToolIterations:   40,
			ContextWindowTokens: 200_000,
			Timezone:            "UTC",
		}},
		Providers: map[string]Provider{},
	}
}

// Load reads path over the defaults. A missing file is not an error when
// optional is true (first start before `nanofleet onboard`); otherwise
// it is one naming the file ("config file /x.json: no such file or
// directory", matching [os.ErrNotExist]). When keys of
// the file are invalid ([ErrInvalid]), Load returns with the error the
// File as far as it decoded, so that the caller can name the bad keys of
// the sections the services own in the same report.
func Load(path string, getenv func(string) string, optional bool) (*File, error) {
	f := Defaults()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && optional {
		f.applyEnv(getenv)
		return f, f.Validate()
	}
	if err != nil {
		// The *fs.PathError names path too: keep only its reason.
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == path {
			err = pe.Err
		}
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if err := Parse(f, data, getenv); err != nil {
		err = fmt.Errorf("config %s: %w", path, err)
		if errors.Is(err, ErrInvalid) {
			return f, err
		}
		return nil, err
	}
	f.Path = path
	return f, nil
}

// Parse decodes data over f after expanding `${VAR}` placeholders,
// applies the environment's overrides (NANOFLEET_MODEL), then validates
// it.
func Parse(f *File, data []byte, getenv func(string) string) error {
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(data, se.Offset)
			err = fmt.Errorf("line %d, column %d: %w", line, col, err)
		}
		return &Error{Err: err}
	}
	// Every unset variable is named; the file is not decoded with them
	// empty, which would name their keys again as unset.
	var unset Problems
	tree = expand(tree, "", getenv, &unset)
	if err := unset.Err(); err != nil {
		return err
	}
	expanded, err := json.Marshal(tree)
	if err != nil {
		return fmt.Errorf("re-encode config: %w", err)
	}
	// The decode leaves out unknown keys and decodes past a mistyped
	// value, so the gateway section and the values decoded are there to
	// be checked too, and all of it is reported at once.
	err = decodeStrict(expanded, f, "")
	// No service owns nanobot's gateway section: each of its keys is
	// refused naming where that setting is in nanofleet.
	gateway := f.Section("gateway", &gatewaySection{})
	f.applyEnv(getenv)
	return joinErrors(err, gateway, f.Validate())
}

// position is the line and column (1-based; a column counts characters)
// of the last byte of data[:offset], where a *json.SyntaxError stopped.
func position(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return line, max(utf8.RuneCount(before[lineStart:]), 1)
}

// applyEnv applies the environment variables that override the file:
// NANOFLEET_MODEL names the model, as OpenAI users set it for a local
// server; NANOFLEET_NATS_URL the fleet's NATS, as the service binaries
// read it, so that a CLI in the same environment joins that fleet instead
// of running one of its own. Flags, applied by the caller after loading,
// override both.
func (f *File) applyEnv(getenv func(string) string) {
	if m := strings.TrimSpace(getenv("NANOFLEET_MODEL")); m != "" {
		f.Agents.Defaults.Model = m
	}
	if u := strings.TrimSpace(getenv("NANOFLEET_NATS_URL")); u != "" {
		f.NATS.URL = u
	}
}

// Validate reports every invalid key of the shared sections, joined.
func (f *File) Validate() error {
	var p Problems
	n, d := f.NATS, f.Agents.Defaults
	LayoutLimits{
		Replicas:               n.Replicas,
		LeaseTTLSeconds:        float64(n.LeaseTTLSeconds),
		DuplicateWindowSeconds: float64(n.DuplicateWindowSeconds),
		ReplayWindowSeconds:    float64(n.ReplayWindowSeconds),
	}.Check(&p)
	// 64: room for a few of the largest objects (a 20 MiB image).
	if n.BlobsMaxMB != 0 && (n.BlobsMaxMB < 64 || n.BlobsMaxMB > 1<<20) {
		p.Add("nats.blobsMaxMB", "must be 0 (the default) or 64..1048576, got %d", n.BlobsMaxMB)
	}
	if n.Port < -1 || n.Port > 65535 {
		p.Add("nats.port", "must be a port number, got %d", n.Port)
	}
	if _, err := subject.NewSpace(n.Prefix); err != nil || n.Prefix == "" {
		p.Add("nats.prefix", "must be 1-32 letters, digits, '-' or '_', got %q", n.Prefix)
	}
	// As bus.Config checks them when it connects, to be named with the rest.
	switch {
	case n.TLS.CertFile != "" && n.TLS.KeyFile == "":
		p.Add("nats.tls.keyFile", "must be set with certFile")
	case n.TLS.CertFile == "" && n.TLS.KeyFile != "":
		p.Add("nats.tls.certFile", "must be set with keyFile")
	}
	if l := f.Observability.Listen; l != "" && !ListenAddr(l) {
		p.Add("observability.listen", "want host:port (\"127.0.0.1:9090\", \":9090\"), got %q", l)
	}
	if d.Model == "" {
		p.Add("agents.defaults.model", "must be set")
	}
	if d.MaxTokens <= 0 {
		p.Add("agents.defaults.maxTokens", "must be positive, got %d", d.MaxTokens)
	}
	if d.Temperature < 0 || d.Temperature > 2 {
		p.Add("agents.defaults.temperature", "must be 0..2, got %g", d.Temperature)
	}
	if d.MaxToolIterations <= 0 || d.MaxToolIterations > 1000 {
		p.Add("agents.defaults.maxToolIterations", "must be 1..1000, got %d", d.MaxToolIterations)
	}
	if d.ContextWindowTokens < 1024 {
		p.Add("agents.defaults.contextWindowTokens", "must be at least 1024, got %d", d.ContextWindowTokens)
	}
	for _, name := range slices.Sorted(maps.Keys(f.Providers)) {
		if n := f.Providers[name].MaxConcurrent; n < -1 || n > 1_000_000 {
			p.Add("providers."+name+".maxConcurrent", "must be -1 (no bound), 0 (the provider's default) or 1..1000000, got %d", n)
		}
		if a := f.Providers[name].APIType; a != "" && a != "auto" {
			p.Add("providers."+name+".apiType", "nanofleet speaks chat completions only; remove the key or set it to \"auto\", got %q", a)
		}
	}
	return p.Err()
}

// ListenAddr says whether addr is a TCP address to listen on: host:port,
// the host possibly empty or a bracketed IPv6 address, the port a number.
// Every listen key is checked by it, so they accept the same addresses.
func ListenAddr(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n <= 65535
}

var placeholder = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expand replaces `${VAR}` and `${VAR:-default}` in every string of tree.
// An unset variable without a default is a problem naming the key, each
// one recorded in p.
func expand(tree any, path string, getenv func(string) string, p *Problems) any {
	switch v := tree.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			v[k] = expand(v[k], join(path, k), getenv, p)
		}
	case []any:
		for i, child := range v {
			v[i] = expand(child, fmt.Sprintf("%s[%d]", path, i), getenv, p)
		}
	case string:
		var missing []string
		s := placeholder.ReplaceAllStringFunc(v, func(m string) string {
			sub := placeholder.FindStringSubmatch(m)
			if val := getenv(sub[1]); val != "" {
				return val
			}
			if sub[2] != "" {
				return sub[3]
			}
			missing = append(missing, sub[1])
			return ""
		})
		if len(missing) > 0 {
			p.Add(path, "environment variable %s is not set", strings.Join(missing, ", "))
		}
		return s
	}
	return tree
}

// ExpandHome replaces a leading "~" with the user's home directory.
func ExpandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("expand %s: %w", p, err)
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
}
