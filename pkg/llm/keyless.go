package llm

import (
	"context"
	"errors"
	"fmt"
)

// NewOrKeyless is [New], except that when the API key is all that is
// missing it returns a client whose every call fails naming the key to
// set, and keyless true: a fleet without a key still starts, so that a new
// user sees it run and each turn says what to do.
func NewOrKeyless(cfg Config, opts ...Option) (c Client, keyless bool, err error) {
	p, err := New(cfg, opts...)
	var ce *ConfigError
	if errors.As(err, &ce) && ce.Field == "APIKey" {
		return noKey{provider: cfg.ProviderName()}, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return p, false, nil
}

// noKey is the model of a fleet without an API key.
type noKey struct{ provider string }

func (n noKey) Chat(context.Context, Request) (*Response, error) {
	return nil, fmt.Errorf("no API key for provider %q: set OPENAI_API_KEY (or providers.%s.apiKey in the config)", n.provider, n.provider)
}
