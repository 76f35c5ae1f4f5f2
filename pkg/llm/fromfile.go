package llm

import (
	"cmp"
	"errors"

	"github.com/nanofleet/nanofleet/pkg/config"
)

// FromFile returns the model provider settings of a config file: the agent defaults'
// provider (or the one inferred from the model name), its entry under
// providers, then the standard environment variables (OPENAI_API_KEY,
// OPENAI_BASE_URL, the preset's key variable). The model is the agent
// defaults' alone: NANOFLEET_MODEL was applied to it when the file was
// loaded, and a flag may have overridden both since.
func FromFile(f *config.File, getenv func(string) string) Config {
	d := f.Agents.Defaults
	if d.Provider == "auto" {
		d.Provider = "" // nanobot's word for inferring it, written by its onboard
	}
	cfg := Config{Name: d.Provider, Model: d.Model, FallbackModels: d.FallbackModels}
	name := d.Provider
	if name == "" {
		name = InferProvider(d.Model)
	}
	if p, ok := f.Providers[name]; ok {
		cfg.Name = name
		cfg.APIKey, cfg.APIBase, cfg.ExtraHeaders = p.APIKey, p.APIBase, p.ExtraHeaders
		cfg.MaxConcurrent = p.MaxConcurrent
	} else if p, ok := f.Providers["custom"]; ok && name == "" {
		cfg.Name = "custom"
		cfg.APIKey, cfg.APIBase, cfg.ExtraHeaders = p.APIKey, p.APIBase, p.ExtraHeaders
		cfg.MaxConcurrent = p.MaxConcurrent
	}
	return ResolveFromEnv(cfg, func(k string) string {
		if k == "NANOFLEET_MODEL" {
			return ""
		}
		return getenv(k)
	})
}

// FileError turns an error of [Config.Validate] (or [New]) for c, as
// returned by [FromFile], into a [*config.Error] naming the file's key; any other error is returned as is. llm's Config speaks Go
// field names because it is also built in code; only here is it known
// which key of the file a field came from.
func FileError(c Config, err error) error {
	var ce *ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	provider := "providers." + cmp.Or(c.Name, "custom")
	key := map[string]string{
		"Name":           "agents.defaults.provider",
		"Model":          "agents.defaults.model",
		"FallbackModels": "agents.defaults.fallbackModels",
		"APIKey":         provider + ".apiKey",
		"APIBase":        provider + ".apiBase",
		"ExtraHeaders":   provider + ".extraHeaders",
		"MaxConcurrent":  provider + ".maxConcurrent",
	}[ce.Field]
	return &config.Error{Key: cmp.Or(key, provider), Err: providerReason{ce}}
}

// providerReason keeps the ConfigError in the chain but prints only its
// reason, the key being named already.
type providerReason struct{ *ConfigError }

func (r providerReason) Error() string { return r.Reason }
func (r providerReason) Unwrap() error { return r.ConfigError }
