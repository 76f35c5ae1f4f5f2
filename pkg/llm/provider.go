package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	openai "github.com/sashabaranov/go-openai"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Client is what the fleet needs from a model provider.
type Client interface {
	Chat(ctx context.Context, req Request) (*Response, error)
}

// Request is one chat completion call.
type Request struct {
	// Model overrides Config.Model when not empty.
	Model    string
	Messages []*nanofleetv1.ChatMessage
	// Tools are sent sorted by name.
	Tools       []*nanofleetv1.ToolDefinition
	Temperature float32
	// MaxTokens bounds the completion; zero leaves it to the provider.
	MaxTokens int
	// ToolChoice forces a tool: "" leaves the choice to the model, "required"
	// makes it call one of Tools, and a tool's name makes it call that one.
	ToolChoice string
	// OnDelta, when set, selects streaming and receives each piece of
	// content and reasoning as it arrives, on the calling goroutine.
	OnDelta func(content, reasoning string)
}

// Response is the assembled answer of the model.
type Response struct {
	Content          string
	ReasoningContent string
	ToolCalls        []*nanofleetv1.ToolCall
	FinishReason     string
	Usage            Usage
	// Model is the model that answered, as the provider reported it.
	Model string
}

// Usage counts tokens, when the provider reports them.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// CachedTokens are the prompt tokens served from the provider's
	// prompt cache (part of PromptTokens).
	CachedTokens int
	// ReasoningTokens are the completion tokens spent reasoning (part of
	// CompletionTokens).
	ReasoningTokens int
}

// Add returns u plus o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + o.PromptTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		CachedTokens:     u.CachedTokens + o.CachedTokens,
		ReasoningTokens:  u.ReasoningTokens + o.ReasoningTokens,
	}
}

// usageFrom reads go-openai's usage, details included.
func usageFrom(u openai.Usage) Usage {
	out := Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		out.CachedTokens = d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}

// Provider is a Client for one OpenAI-compatible host. It is safe for
// concurrent use.
type Provider struct {
	cfg    Config
	preset Preset
	client *openai.Client
	s      settings
	lim    *limiter
	tools  toolCache
}

var _ Client = (*Provider)(nil)

// New validates cfg, applies the defaults and returns a Provider.
func New(cfg Config, opts ...Option) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("llm: new provider: %w", err)
	}
	cfg = cfg.withDefaults()
	cfg.ExtraHeaders = maps.Clone(cfg.ExtraHeaders)
	cfg.FallbackModels = slices.Clone(cfg.FallbackModels)
	s := defaultSettings()
	for _, o := range opts {
		if err := o(&s); err != nil {
			return nil, fmt.Errorf("llm: new provider: %w", err)
		}
	}
	preset, _ := PresetFor(cfg.Name)
	var oc openai.ClientConfig
	if preset.Azure {
		oc = openai.DefaultAzureConfig(cfg.APIKey, cfg.APIBase)
	} else {
		oc = openai.DefaultConfig(cfg.APIKey)
		oc.BaseURL = cfg.APIBase
	}
	oc.HTTPClient = &doer{next: s.httpClient, headers: cfg.ExtraHeaders}
	return &Provider{
		cfg:    cfg,
		preset: preset,
		client: openai.NewClientWithConfig(oc),
		s:      s,
		lim:    newLimiter(cfg.MaxConcurrent),
	}, nil
}

// Name returns the preset name of the provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Model returns the default model.
func (p *Provider) Model() string { return p.cfg.Model }

// Chat sends req, retrying and falling back as described in the package
// documentation.
func (p *Provider) Chat(ctx context.Context, req Request) (*Response, error) {
	msgs, err := convertMessages(req.Messages)
	if err != nil {
		return nil, fmt.Errorf("llm: chat: %w", err)
	}
	tools, err := p.tools.convert(req.Tools)
	if err != nil {
		return nil, fmt.Errorf("llm: chat: %w", err)
	}
	models := p.models(req.Model)
	errs := make([]error, 0, len(models))
	for i, model := range models {
		resp, err := p.chatModel(ctx, model, req, msgs, tools)
		if err == nil {
			if i > 0 {
				p.s.logger.InfoContext(ctx, "llm: fallback model answered",
					slog.String("provider", p.cfg.Name), slog.String("model", model))
			}
			return resp, nil
		}
		errs = append(errs, err)
		if !fallbackable(ctx, err) {
			break
		}
		if i+1 < len(models) {
			p.s.logger.WarnContext(ctx, "llm: model failed, trying fallback",
				slog.String("provider", p.cfg.Name), slog.String("model", model),
				slog.String("fallback", models[i+1]), slog.Any("error", err))
		}
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, fmt.Errorf("llm: %s: %d models failed: %w", p.cfg.Name, len(errs), errors.Join(errs...))
}

// models is the request's model followed by the distinct fallbacks.
func (p *Provider) models(model string) []string {
	if model == "" {
		model = p.cfg.Model
	}
	out := []string{model}
	for _, m := range p.cfg.FallbackModels {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// maxLimitedTries bounds the 429 retries of a provider that asks for no
// wait at all, which the patience alone would not.
const maxLimitedTries = 30

// chatModel calls one model, retrying temporary failures.
func (p *Provider) chatModel(ctx context.Context, model string, req Request,
	msgs []openai.ChatCompletionMessage, tools toolSet,
) (*Response, error) {
	creq := p.buildRequest(model, req, msgs, tools.list)
	attempts := p.cfg.MaxRetries + 1
	// 429s are retried apart from the other failures, for as long as the
	// rate-limit patience lasts: a busy provider slows turns down rather
	// than failing them.
	var (
		limitedWait  time.Duration
		limitedTries int
	)
	for n, tries := 0, 0; ; tries++ {
		resp, info, err := p.attempt(ctx, creq, tools.encoded, req.OnDelta)
		if err == nil {
			if resp.Model == "" {
				resp.Model = model
			}
			return resp, nil
		}
		limited := errors.Is(err, ErrRateLimited) && limitedWait < p.s.rateLimitPatience && limitedTries < maxLimitedTries
		err = fmt.Errorf("llm: %s: model %q: attempt %d/%d: %w", p.cfg.Name, model, tries+1, attempts, err)
		if (!limited && n+1 >= attempts) || !retryable(ctx, err, info) {
			return nil, err
		}
		wait := p.s.backoff.Wait(n)
		if limited {
			wait = p.s.backoff.Wait(tries)
		}
		var ae *APIError
		if errors.As(err, &ae) && ae.HasRetryAfter() {
			if ae.RetryAfter > p.s.maxRetryAfter {
				return nil, fmt.Errorf("%w (Retry-After %s exceeds %s)", err, ae.RetryAfter, p.s.maxRetryAfter)
			}
			wait = ae.RetryAfter
		}
		if limited {
			limitedWait += wait
			limitedTries++
		} else {
			n++
		}
		p.s.logger.WarnContext(ctx, "llm: retrying",
			slog.String("provider", p.cfg.Name), slog.String("model", model),
			slog.Int("attempt", tries+1), slog.Duration("wait", wait), slog.Any("error", err))
		if serr := p.s.sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("llm: %s: model %q: waiting to retry: %w", p.cfg.Name, model, serr)
		}
	}
}

func (p *Provider) buildRequest(model string, req Request,
	msgs []openai.ChatCompletionMessage, tools []openai.Tool,
) openai.ChatCompletionRequest {
	model = wireModel(p.cfg.Name, model)
	creq := openai.ChatCompletionRequest{
		Model:       model,
		Messages:    msgs,
		Tools:       tools,
		Temperature: req.Temperature,
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		creq.ToolChoice = req.ToolChoice
	default:
		creq.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: req.ToolChoice}}
	}
	if isReasoningModel(model) {
		creq.MaxCompletionTokens = req.MaxTokens
		if creq.Temperature != 1 {
			creq.Temperature = 0
		}
	} else {
		// max_tokens, deprecated by OpenAI for its reasoning models only,
		// is what every other OpenAI-compatible server reads.
		//lint:ignore SA1019 see above
		creq.MaxTokens = req.MaxTokens
	}
	if req.OnDelta != nil {
		creq.Stream = true
		if p.preset.StreamUsage {
			creq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
		}
	}
	return creq
}

// attempt makes one HTTP call bounded by Config.Timeout. creq's tools are
// checked by go-openai's validation, and sent as tools, their encoding.
func (p *Provider) attempt(ctx context.Context, creq openai.ChatCompletionRequest, tools []byte,
	onDelta func(content, reasoning string),
) (*Response, *callInfo, error) {
	epoch, err := p.lim.acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("waiting for a free call to the provider: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	ctx, info := withCallInfo(ctx)
	limited := false
	defer func() { p.lim.release(epoch, limited) }()
	if len(creq.Tools) > 0 {
		// go-openai validates what it sends; the doer adds the tools.
		if err := openai.NewReasoningValidator().Validate(creq); err != nil {
			return nil, info, err
		}
		creq.Tools, info.tools = nil, tools
	}
	var resp *Response
	if onDelta != nil {
		resp, err = p.stream(ctx, creq, onDelta)
	} else {
		resp, err = p.complete(ctx, creq)
	}
	if err != nil {
		if errors.Is(err, ErrStreamInterrupted) {
			return nil, info, err
		}
		if ae := apiErrorFrom(err, info, p.s.now()); ae != nil {
			limited = ae.Status == http.StatusTooManyRequests
			return nil, info, ae
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return nil, info, fmt.Errorf("timed out after %s: %w", p.cfg.Timeout, err)
		}
		return nil, info, err
	}
	return resp, info, nil
}

func (p *Provider) complete(ctx context.Context, creq openai.ChatCompletionRequest) (*Response, error) {
	out, err := p.client.CreateChatCompletion(ctx, creq)
	if err != nil {
		return nil, err
	}
	if len(out.Choices) == 0 {
		return nil, ErrNoChoices
	}
	c := out.Choices[0]
	return &Response{
		Content:          c.Message.Content,
		ReasoningContent: c.Message.ReasoningContent,
		ToolCalls:        toolCallsFrom(c.Message.ToolCalls),
		FinishReason:     string(c.FinishReason),
		Usage:            usageFrom(out.Usage),
		Model:            out.Model,
	}, nil
}
