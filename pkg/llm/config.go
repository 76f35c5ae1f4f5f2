package llm

import (
	"errors"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultTimeout    = 120 * time.Second
	DefaultMaxRetries = 3
)

// Config is what a Provider needs. Zero values take the defaults described
// on each field; ResolveFromEnv fills it from the environment.
type Config struct {
	// Name selects a preset (see Presets). Empty means "custom" when APIBase
	// is set and "openai" otherwise.
	Name string
	// APIKey is sent as a bearer token (api-key header for Azure).
	APIKey string
	// APIBase overrides the preset's base URL, e.g. "http://host:8000/v1".
	APIBase string
	// Model is the default model, used when Request.Model is empty.
	Model string
	// ExtraHeaders are set on every HTTP request (e.g. OpenRouter's
	// HTTP-Referer and X-Title).
	ExtraHeaders map[string]string
	// Timeout bounds each attempt, streaming included. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is how many times a failed attempt is retried for each
	// model. Zero means DefaultMaxRetries; a negative value disables retries.
	MaxRetries int
	// FallbackModels are tried in order after the model of the request has
	// failed.
	FallbackModels []string
	// MaxConcurrent bounds the calls in flight to the provider from this
	// process; more wait their turn without holding a connection. Zero
	// takes the preset's (a local server that runs a few requests at once),
	// negative means no bound. Either way a 429 lowers the bound for a
	// while (see the package documentation).
	MaxConcurrent int
}

// Validate reports every problem found, each a *ConfigError naming the
// field (they match ErrInvalidConfig), joined; a lone one as it is. An
// unknown provider is reported alone: the rest is checked against it.
func (c Config) Validate() error {
	name := c.presetName()
	p, ok := PresetFor(name)
	if !ok {
		return &ConfigError{Field: "Name", Reason: "unknown provider " + strconv.Quote(c.Name)}
	}
	var errs []error
	add := func(field, reason string) { errs = append(errs, &ConfigError{Field: field, Reason: reason}) }
	switch {
	case c.APIBase == "" && p.APIBase == "":
		add("APIBase", "required for provider "+p.Name)
	case c.APIBase != "":
		u, err := url.Parse(c.APIBase)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("APIBase", "not an absolute http(s) URL: "+strconv.Quote(c.APIBase))
		}
	}
	if p.KeyRequired && c.APIKey == "" && (c.APIBase == "" || sameBase(c.APIBase, p.APIBase) || p.Azure) {
		reason := "required for provider " + p.Name
		if p.KeyEnv != "" {
			reason += " (set " + p.KeyEnv + ")"
		}
		add("APIKey", reason)
	}
	if strings.TrimSpace(c.Model) == "" {
		add("Model", "required")
	}
	if c.Timeout < 0 {
		add("Timeout", "must not be negative")
	}
	if c.MaxConcurrent > 1_000_000 {
		add("MaxConcurrent", "must be at most 1000000, got "+strconv.Itoa(c.MaxConcurrent))
	}
	for i, m := range c.FallbackModels {
		if strings.TrimSpace(m) == "" {
			add("FallbackModels", "entry "+strconv.Itoa(i)+" is empty")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.ExtraHeaders)) {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			add("ExtraHeaders", "invalid header name "+strconv.Quote(k))
		}
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// LogValue implements slog.LogValuer and keeps the key out of logs.
func (c Config) LogValue() slog.Value {
	key := ""
	if c.APIKey != "" {
		key = "[redacted]"
	}
	return slog.GroupValue(
		slog.String("name", c.presetName()),
		slog.String("api_base", c.APIBase),
		slog.String("api_key", key),
		slog.String("model", c.Model),
		slog.Duration("timeout", c.Timeout),
		slog.Int("max_retries", c.MaxRetries),
		slog.Int("max_concurrent", c.MaxConcurrent),
		slog.Any("fallback_models", c.FallbackModels),
	)
}

// presetName is the preset the config selects.
func (c Config) presetName() string {
	switch {
	case c.Name != "":
		return strings.ToLower(strings.TrimSpace(c.Name))
	case c.APIBase != "":
		return ProviderCustom
	default:
		return ProviderOpenAI
	}
}

// ProviderName is the preset the provider built from c uses, as
// [Provider.Name] reports it.
func (c Config) ProviderName() string { return c.presetName() }

// withDefaults returns c with the zero fields filled.
func (c Config) withDefaults() Config {
	c.Name = c.presetName()
	if p, ok := PresetFor(c.Name); ok && c.APIBase == "" {
		c.APIBase = p.APIBase
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxConcurrent == 0 {
		if p, ok := PresetFor(c.Name); ok {
			c.MaxConcurrent = p.MaxConcurrent
		}
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = DefaultMaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	return c
}

func sameBase(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}
