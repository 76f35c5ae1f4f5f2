package config

import (
	"github.com/nanofleet/nanofleet/pkg/llm"
)

// ModelProvider returns the model provider settings: the agent defaults'
// provider (or the one inferred from the model name), its entry under
// providers, then the standard environment variables (OPENAI_API_KEY,
// OPENAI_BASE_URL, the preset's key variable). The model is the agent
// defaults' alone: NANOFLEET_MODEL was applied to it when the file was
// loaded, and a flag may have overridden both since.
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
	return llm.ResolveFromEnv(cfg, func(k string) string {
		if k == "NANOFLEET_MODEL" {
			return ""
		}
		return getenv(k)
	})
}
