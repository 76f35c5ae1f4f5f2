package llm

import (
	"fmt"
	"strings"
)

// Preset describes a known provider: where it lives and where its key comes
// from.
type Preset struct {
	// Name is the value of Config.Name that selects the preset.
	Name string
	// APIBase is the default base URL; empty when the user must give one.
	APIBase string
	// KeyEnv is the environment variable holding the API key, if any.
	KeyEnv string
	// KeyRequired says the preset's public host rejects calls without a key.
	KeyRequired bool
	// Azure selects go-openai's Azure configuration (api-key header,
	// deployments in the path, api-version query).
	Azure bool
	// StreamUsage says the host accepts stream_options.include_usage.
	StreamUsage bool
	// MaxConcurrent is the default Config.MaxConcurrent: local servers
	// run a few requests at once and queue the rest, and a call queued
	// there spends its attempt timeout waiting. Zero: no bound.
	MaxConcurrent int
}

// Preset names.
const (
	ProviderOpenAI     = "openai"
	ProviderOpenRouter = "openrouter"
	ProviderDeepSeek   = "deepseek"
	ProviderGroq       = "groq"
	ProviderGemini     = "gemini"
	ProviderAnthropic  = "anthropic"
	ProviderAzure      = "azure"
	ProviderOllama     = "ollama"
	ProviderVLLM       = "vllm"
	ProviderLMStudio   = "lmstudio"
	// ProviderCustom is any OpenAI-compatible host given by APIBase; the
	// key is optional.
	ProviderCustom = "custom"
)

// Presets returns every known preset, in a stable order.
func Presets() []Preset {
	return []Preset{
		{Name: ProviderOpenAI, APIBase: "https://api.openai.com/v1", KeyEnv: "OPENAI_API_KEY", KeyRequired: true, StreamUsage: true},
		{Name: ProviderOpenRouter, APIBase: "https://openrouter.ai/api/v1", KeyEnv: "OPENROUTER_API_KEY", KeyRequired: true, StreamUsage: true},
		{Name: ProviderDeepSeek, APIBase: "https://api.deepseek.com/v1", KeyEnv: "DEEPSEEK_API_KEY", KeyRequired: true, StreamUsage: true},
		{Name: ProviderGroq, APIBase: "https://api.groq.com/openai/v1", KeyEnv: "GROQ_API_KEY", KeyRequired: true, StreamUsage: true},
		{Name: ProviderGemini, APIBase: "https://generativelanguage.googleapis.com/v1beta/openai", KeyEnv: "GEMINI_API_KEY", KeyRequired: true, StreamUsage: true},
		{Name: ProviderAnthropic, APIBase: "https://api.anthropic.com/v1", KeyEnv: "ANTHROPIC_API_KEY", KeyRequired: true, StreamUsage: true},
		{Name: ProviderAzure, KeyEnv: "AZURE_OPENAI_API_KEY", KeyRequired: true, Azure: true},
		{Name: ProviderOllama, APIBase: "http://localhost:11434/v1", StreamUsage: true, MaxConcurrent: 4},
		{Name: ProviderVLLM, APIBase: "http://localhost:8000/v1", StreamUsage: true},
		{Name: ProviderLMStudio, APIBase: "http://localhost:1234/v1", StreamUsage: true, MaxConcurrent: 4},
		{Name: ProviderCustom, StreamUsage: true},
	}
}

// PresetFor returns the preset called name (case-insensitive).
func PresetFor(name string) (Preset, bool) {
	name = strings.ToLower(strings.TrimSpace(name))
	for _, p := range Presets() {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// InferProvider guesses the provider from a model name, like nanobot does:
// a leading "<preset>/" segment wins ("openrouter/anthropic/claude-3" is
// openrouter, "ollama/llama3" is ollama); otherwise keywords in the name
// ("deepseek-chat" is deepseek, "claude-…" anthropic, "gemini-…" gemini,
// "gpt-…", "o1…", "o3…", "o4…" openai). It returns "" when it cannot tell.
func InferProvider(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if m == "" {
		return ""
	}
	if prefix, _, ok := strings.Cut(m, "/"); ok {
		if p, found := PresetFor(prefix); found && p.Name != ProviderCustom {
			return p.Name
		}
	}
	switch {
	case strings.Contains(m, "openrouter"):
		return ProviderOpenRouter
	case strings.Contains(m, "deepseek"):
		return ProviderDeepSeek
	case strings.Contains(m, "groq"):
		return ProviderGroq
	case strings.Contains(m, "gemini"):
		return ProviderGemini
	case strings.Contains(m, "claude"), strings.Contains(m, "anthropic"):
		return ProviderAnthropic
	case strings.HasPrefix(m, "gpt-"), strings.HasPrefix(m, "chatgpt"),
		strings.HasPrefix(m, "o1"), strings.HasPrefix(m, "o3"), strings.HasPrefix(m, "o4"):
		return ProviderOpenAI
	}
	return ""
}

// ResolveFromEnv fills cfg from the environment (read through getenv) the way
// users of OpenAI tooling expect:
//
//   - NANOFLEET_MODEL, when set, overrides cfg.Model.
//   - With cfg.Name unset: an APIBase (from cfg or OPENAI_BASE_URL) selects
//     an OpenAI-compatible host ("custom", key optional); otherwise the
//     provider is inferred from the model (InferProvider), defaulting to
//     openai.
//   - For openai and such a compatible host, OPENAI_API_KEY and
//     OPENAI_BASE_URL fill APIKey and APIBase when they are empty; but a
//     compatible host the config names (an APIBase other than
//     OPENAI_BASE_URL) does not get OPENAI_API_KEY, which is OpenAI's key
//     or the key of the host OPENAI_BASE_URL names (nanobot's custom
//     provider reads no variable either): a local server or a third
//     party is not sent it ([WithheldEnvKey] says so at start).
//   - Otherwise the preset's own key variable (e.g. DEEPSEEK_API_KEY) fills
//     an empty APIKey.
//
// Values already in cfg win over the environment, except the model. The
// result still needs Validate.
func ResolveFromEnv(cfg Config, getenv func(string) string) Config {
	if m := strings.TrimSpace(getenv("NANOFLEET_MODEL")); m != "" {
		cfg.Model = m
	}
	envBase := strings.TrimSpace(getenv("OPENAI_BASE_URL"))
	if cfg.Name == "" {
		switch {
		case cfg.APIBase != "":
			cfg.Name = ProviderCustom
		case envBase != "":
			cfg.Name = ProviderCustom
		default:
			cfg.Name = InferProvider(cfg.Model)
			if cfg.Name == "" {
				cfg.Name = ProviderOpenAI
			}
		}
	}
	name := strings.ToLower(cfg.Name)
	if name == ProviderOpenAI || name == ProviderCustom {
		if cfg.APIBase == "" {
			cfg.APIBase = envBase
		}
		if cfg.APIKey == "" && takesEnvKey(cfg, envBase) {
			cfg.APIKey = strings.TrimSpace(getenv("OPENAI_API_KEY"))
		}
	}
	if p, ok := PresetFor(name); ok && p.KeyEnv != "" && cfg.APIKey == "" {
		cfg.APIKey = strings.TrimSpace(getenv(p.KeyEnv))
	}
	return cfg
}

// takesEnvKey says whether OPENAI_API_KEY is for the host of cfg, its
// APIBase already filled from envBase (OPENAI_BASE_URL): OpenAI, or the
// compatible host the environment names. [ResolveFromEnv] sends the key
// only then and [WithheldEnvKey] warns otherwise, so both ask here.
func takesEnvKey(cfg Config, envBase string) bool {
	switch strings.ToLower(cfg.Name) {
	case ProviderOpenAI:
		return true
	case ProviderCustom:
		return cfg.APIBase == envBase
	}
	return false
}

// WithheldEnvKey is the warning for a compatible host the config names
// without a key while OPENAI_API_KEY is set: [ResolveFromEnv] does not
// send it there, and a host that needs a key answers 401. "" otherwise.
func WithheldEnvKey(cfg Config, getenv func(string) string) string {
	if strings.ToLower(cfg.Name) != ProviderCustom || cfg.APIKey != "" || strings.TrimSpace(getenv("OPENAI_API_KEY")) == "" ||
		takesEnvKey(cfg, strings.TrimSpace(getenv("OPENAI_BASE_URL"))) {
		return ""
	}
	return fmt.Sprintf("providers.custom has no apiKey: OPENAI_API_KEY is not sent to %s, a host the config names (it is OpenAI's key, or OPENAI_BASE_URL's host's); set providers.custom.apiKey if the host needs a key", cfg.APIBase)
}
