package config

import (
	"github.com/nanofleet/nanofleet/pkg/llm"
)

// ModelProvider returns the model provider settings: the agent defaults'
// provider (or the one inferred from the model name), its entry under
// providers, then the standard environment variables (OPENAI_API_KEY,
// OPENAI_BASE_URL, NANOFLEET_MODEL, the preset's key variable).
func (f *File) ModelProvider(getenv func(string) string) llm.Config {
	d := f.Agents.Defaults
	cfg := llm.Config{Name: d.Provider, Model: d.Model, FallbackModels: d.FallbackModels}
	name := d.Provider
	if name == "" {
		name = llm.InferProvider(d.Model)
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
	return llm.ResolveFromEnv(cfg, getenv)
}
