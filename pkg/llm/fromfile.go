package llm

import (
	"cmp"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"

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
		if !keyed(f, name, getenv) {
			name = cmp.Or(fallbackProvider(f, d.Model), name)
		}
	}
	if p, ok := f.Providers[name]; ok {
		cfg.Name = name
		cfg.APIKey, cfg.APIBase, cfg.ExtraHeaders = p.APIKey, p.APIBase, p.ExtraHeaders
		cfg.MaxConcurrent = p.MaxConcurrent
	} else if p, ok := f.Providers["custom"]; ok && name == "" && !unset(p) {
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

// keyed says whether the provider inferred from the model name can be
// called as it is: [ResolveFromEnv] finds it a key (its entry's or its
// environment variable's), or its preset needs none, or it is OpenAI
// pointed at another host. For "" (the name tells none) that is a
// providers.custom that sets something (nanobot writes an empty one into
// every file) or OpenAI's variables: all FromFile reads for it.
func keyed(f *config.File, name string, getenv func(string) string) bool {
	if name == "" {
		return !unset(f.Providers[ProviderCustom]) || getenv("OPENAI_BASE_URL") != "" || getenv("OPENAI_API_KEY") != ""
	}
	p := f.Providers[name]
	c := ResolveFromEnv(Config{Name: name, APIKey: p.APIKey, APIBase: p.APIBase}, getenv)
	pr, _ := PresetFor(name)
	return c.APIKey != "" || !pr.KeyRequired || (name == ProviderOpenAI && c.APIBase != "")
}

// fallbackProvider is the provider nanobot falls back to when the one
// the model names has no key: for a model that names none, a local
// server given an apiBase; then the first provider with a key, in
// nanobot's registry order (custom, azure, the openrouter gateway, then
// the direct providers). So nanobot's default model
// (anthropic/claude-opus-4-5) with an OpenRouter key, which nanobot's
// users set up, goes through OpenRouter, as it does in nanobot; it
// asked for ANTHROPIC_API_KEY. "" when no provider is configured.
func fallbackProvider(f *config.File, model string) string {
	if prefix, _, ok := strings.Cut(strings.ToLower(model), "/"); !ok || !isPreset(prefix) {
		for _, name := range []string{ProviderVLLM, ProviderOllama, ProviderLMStudio} {
			if f.Providers[name].APIBase != "" {
				return name
			}
		}
	}
	for _, name := range []string{ProviderCustom, ProviderAzure, ProviderOpenRouter, ProviderAnthropic, ProviderOpenAI,
		ProviderDeepSeek, ProviderGemini, ProviderVLLM, ProviderOllama, ProviderLMStudio, ProviderGroq} {
		if f.Providers[name].APIKey != "" {
			return name
		}
	}
	return ""
}

func isPreset(name string) bool {
	_, ok := PresetFor(name)
	return ok
}

// CheckFile reports every problem of the file's model settings, each a
// [*config.Error] naming its key: the providers' names
// ([CheckProviders]) and what [Config.Validate] refuses of the provider
// [FromFile] selects with getenv. A missing API key is not one: a
// service starts without it ([NewOrKeyless]), and the rest of the
// provider's settings are checked as if it were set.
func CheckFile(f *config.File, getenv func(string) string) error {
	errs := []error{CheckProviders(f)}
	c := FromFile(f, getenv)
	keyed := c
	if keyed.APIKey == "" {
		keyed.APIKey = "unset"
	}
	if err := keyed.Validate(); err != nil {
		errs = append(errs, FileError(c, err))
	}
	return errors.Join(errs...)
}

// NewFromFile builds the model client a service calls, from the config
// file and getenv ([FromFile]) with maxRetries as [Config.MaxRetries]:
// the one way the worker and the consolidator (their `Model`) get theirs.
// It refuses what [CheckFile] refuses, and names what [New] refuses by its
// key in the file ([FileError]). An API key that is all that is missing
// is no error: the client is keyless ([NewOrKeyless]) and log is warned
// with what to set and, after it, withoutKey: what the service does
// until then ("turns answer with an error"). The logger ([WithLogger])
// is also warned of a key [WithheldEnvKey] holds back. opts are the
// client's ([New]). The provider's name comes with the client.
func NewFromFile(f *config.File, getenv func(string) string, maxRetries int, withoutKey string, opts ...Option) (Client, string, error) {
	if err := CheckFile(f, getenv); err != nil {
		return nil, "", err
	}
	pc := FromFile(f, getenv)
	pc.MaxRetries = maxRetries
	p, keyless, err := NewOrKeyless(pc, opts...)
	if err != nil {
		return nil, "", FileError(pc, err)
	}
	log := loggerOf(opts)
	if w := WithheldEnvKey(pc, getenv); w != "" {
		log.Warn(w)
	}
	if keyless {
		log.Warn("no model API key configured: "+MissingKey(pc.ProviderName())+"; until then "+withoutKey, "provider", pc.ProviderName())
	}
	return p, pc.ProviderName(), nil
}

// CheckProviders names every entry of the file's providers that is not a
// preset's (see [Presets]), which [FromFile] would never read: a
// misspelt name, one in another case, nanobot's name for a preset
// (azure_openai), or a provider of nanobot's that nanofleet does not have
// (zhipu). nanobot writes every provider of its schema into its
// config.json, most of them unset: an entry of one that sets nothing is
// left alone.
func CheckProviders(f *config.File) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(f.Providers)) {
		if _, ok := preset(name); ok {
			continue
		}
		key := "providers." + name
		nb := snakeCase(name)
		to, renamed := nanobotRenamed[nb]
		switch {
		case (renamed || slices.Contains(nanobotOnly, nb)) && unset(f.Providers[name]):
		case renamed:
			errs = append(errs, config.Invalid(key, "nanobot's %s is nanofleet's %s: rename the key to providers.%s", nb, to, to))
		case slices.Contains(nanobotOnly, nb):
			errs = append(errs, config.Invalid(key, "nanobot's %s provider is not supported by nanofleet; for an OpenAI-compatible endpoint use providers.custom (apiKey, apiBase) with agents.defaults.provider \"custom\"; nanofleet has %s", nb, presetNames()))
		default:
			reason := "unknown provider; nanofleet has " + presetNames()
			if near := nearestPreset(name); near != "" {
				reason += "; did you mean " + near + "?"
			}
			errs = append(errs, config.Invalid(key, "%s", reason))
		}
	}
	return errors.Join(errs...)
}

// unset says whether p sets nothing, as nanobot writes a provider it does
// not use.
func unset(p config.Provider) bool {
	return p.APIKey == "" && p.APIBase == "" && len(p.ExtraHeaders) == 0 && p.MaxConcurrent == 0 && (p.APIType == "" || p.APIType == "auto")
}

// preset is the preset called exactly name (the file's provider names
// are case-sensitive, as [FromFile] looks them up).
func preset(name string) (Preset, bool) {
	for _, p := range Presets() {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// presetNames lists the presets' names, saying what custom is.
func presetNames() string {
	var names []string
	for _, p := range Presets() {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ") + " (any OpenAI-compatible endpoint, by its apiBase)"
}

// nearestPreset is the preset name that name is likely a misspelling of:
// the same but for case, or at most two letters added, dropped, changed
// or swapped ("opneai"); "" if none.
func nearestPreset(name string) string {
	best, bestD := "", 3
	for _, p := range Presets() {
		d := distance(strings.ToLower(name), p.Name)
		if d < bestD {
			best, bestD = p.Name, d
		}
	}
	return best
}

// distance is the optimal string alignment distance of a and b: the
// edits (insert, delete, substitute, swap two neighbours) from one to the
// other.
func distance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}

// FileError turns an error of [Config.Validate] (or [New]) for c, as
// returned by [FromFile], into a [*config.Error] naming the file's key; any other error is returned as is. llm's Config speaks Go
// field names because it is also built in code; only here is it known
// which key of the file a field came from.
func FileError(c Config, err error) error {
	// Validate joins its problems: each is named on its own.
	if errs := configErrors(err); len(errs) > 1 {
		out := make([]error, 0, len(errs))
		for _, e := range errs {
			out = append(out, FileError(c, e))
		}
		return errors.Join(out...)
	}
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

// configErrors are the *ConfigErrors of err, as [Config.Validate] joined
// them and [New] wrapped the join; none when err holds none.
func configErrors(err error) []error {
	switch e := err.(type) {
	case *ConfigError:
		return []error{e}
	case interface{ Unwrap() []error }:
		var out []error
		for _, c := range e.Unwrap() {
			out = append(out, configErrors(c)...)
		}
		return out
	case interface{ Unwrap() error }:
		return configErrors(e.Unwrap())
	}
	return nil
}

// loggerOf is the logger opts set, as [New] applies them; opts that fail
// were refused before this is asked.
func loggerOf(opts []Option) *slog.Logger {
	s := settings{logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		_ = o(&s)
	}
	return s.logger
}
