package llm

import (
	"context"
	"fmt"
)

// NewOrKeyless is [New], except that when the API key is all that is
// missing it returns a client whose every call fails naming the key to
// set, and keyless true: a fleet without a key still starts, so that a new
// user sees it run and each turn says what to do.
func NewOrKeyless(cfg Config, opts ...Option) (c Client, keyless bool, err error) {
	p, err := New(cfg, opts...)
	if onlyNoKey(err) {
		return noKey{provider: cfg.ProviderName()}, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return p, false, nil
}

// onlyNoKey says whether err is [New]'s refusal of a config whose API
// key is missing, and nothing else.
func onlyNoKey(err error) bool {
	errs := configErrors(err)
	for _, e := range errs {
		if e.(*ConfigError).Field != "APIKey" {
			return false
		}
	}
	return len(errs) > 0
}

// noKey is the model of a fleet without an API key.
type noKey struct{ provider string }

func (n noKey) Chat(context.Context, Request) (*Response, error) {
	return nil, fmt.Errorf("no API key for provider %q: %s", n.provider, MissingKey(n.provider))
}

// MissingKey says how to give provider (a preset's name) its API key:
// "set OPENAI_API_KEY (or providers.openai.apiKey in the config)", the
// variable being the one [ResolveFromEnv] reads for it. A keyless model's
// calls fail saying it, and a service that starts with one warns with it.
func MissingKey(provider string) string {
	env := "OPENAI_API_KEY"
	if p, ok := PresetFor(provider); ok && p.KeyEnv != "" {
		env = p.KeyEnv
	}
	return fmt.Sprintf("set %s (or providers.%s.apiKey in the config)", env, provider)
}
