package observe

import "github.com/prometheus/client_golang/prometheus"

// Label values used across the fleet. Services may use others where these
// do not fit, but the dashboard groups by these.
const (
	// OutcomeOK is a turn or tool call that finished normally.
	OutcomeOK = "ok"
	// OutcomeError is a turn or tool call that failed.
	OutcomeError = "error"
	// OutcomeAborted is a turn stopped before it finished (/stop, lost
	// lease, shutdown deadline).
	OutcomeAborted = "aborted"
	// OutcomeDeadLetter is a turn whose message went to the dead letters.
	OutcomeDeadLetter = "dead_letter"
	// OutcomeRefused is a tool call the sandbox refused to run.
	OutcomeRefused = "refused"
	// OutcomeTimeout is a tool call killed by its timeout.
	OutcomeTimeout = "timeout"

	// TokensPrompt is the kind label of prompt (input) tokens.
	TokensPrompt = "prompt"
	// TokensCompletion is the kind label of completion (output) tokens.
	TokensCompletion = "completion"
	// TokensCached is the kind label of prompt tokens served from the
	// provider's prompt cache.
	TokensCached = "cached"
	// TokensReasoning is the kind label of completion tokens the model
	// spent reasoning.
	TokensReasoning = "reasoning"

	// RefusalPathEscape: a path resolved outside the session's workspace.
	RefusalPathEscape = "path_escape"
	// RefusalNoSandbox: exec refused because bubblewrap cannot start and
	// the weaker guard is not allowed.
	RefusalNoSandbox = "no_sandbox"
	// RefusalPrivateAddress: a web request to a private, link-local or
	// metadata address, before or after redirects and DNS resolution.
	RefusalPrivateAddress = "private_address"
	// RefusalDeniedCommand: a command the exec guard does not allow.
	RefusalDeniedCommand = "denied_command"
)

// Metrics is the fleet's one set of Prometheus metrics. Every service
// registers the same names so that the dashboard in deploy/grafana reads
// any mix of them; a service only moves the ones it owns.
type Metrics struct {
	// Turns counts finished agent turns by outcome (OutcomeOK,
	// OutcomeError, OutcomeAborted, OutcomeDeadLetter).
	// nanofleet_turns_total{outcome}; agent-worker.
	Turns *prometheus.CounterVec

	// TurnDuration observes the wall time of a turn, from taking the
	// session's lease to the ack, in seconds.
	// nanofleet_turn_duration_seconds; agent-worker.
	TurnDuration prometheus.Histogram

	// ModelRequestDuration observes the latency of one model call
	// (including retries of that call) by provider preset and model name.
	// nanofleet_model_request_duration_seconds{provider,model};
	// agent-worker, memory-consolidator.
	ModelRequestDuration *prometheus.HistogramVec

	// ModelTokens counts tokens reported by the provider, by kind
	// (TokensPrompt, TokensCompletion, TokensCached, TokensReasoning).
	// nanofleet_model_tokens_total{provider,model,kind};
	// agent-worker, memory-consolidator.
	ModelTokens *prometheus.CounterVec

	// ToolCalls counts tool calls by tool name and outcome (OutcomeOK,
	// OutcomeError, OutcomeRefused, OutcomeTimeout).
	// nanofleet_tool_calls_total{tool,outcome}; agent-worker (fleet
	// tools), tool-runner (world tools).
	ToolCalls *prometheus.CounterVec

	// SandboxRefusals counts operations the sandbox refused, by reason
	// (RefusalPathEscape, RefusalNoSandbox, RefusalPrivateAddress,
	// RefusalDeniedCommand).
	// nanofleet_sandbox_refusals_total{reason}; tool-runner.
	SandboxRefusals *prometheus.CounterVec

	// ConsumerPending is the number of messages not yet delivered to a
	// JetStream consumer (its lag), sampled periodically.
	// nanofleet_consumer_pending{stream,consumer}; every service, for the
	// consumers it reads.
	ConsumerPending *prometheus.GaugeVec

	// LeaseContention counts messages put back because their session's
	// lease was held by another turn.
	// nanofleet_lease_contention_total; agent-worker.
	LeaseContention prometheus.Counter

	// Redeliveries counts messages received with a delivery count above
	// one. nanofleet_redeliveries_total; every consumer.
	Redeliveries prometheus.Counter

	// DeadLetters counts messages moved to the dead-letter stream, by the
	// stream or component they came from ("inbound", "outbound", "memory").
	// nanofleet_dead_letters_total{source}; every consumer.
	DeadLetters *prometheus.CounterVec

	// DeliveryRetries counts retried deliveries to a chat platform, by
	// channel ("telegram", "slack", "web", ...).
	// nanofleet_delivery_retries_total{channel}; channel-gateway.
	DeliveryRetries *prometheus.CounterVec

	// HTTPConnectionsRefused counts connections to the gateway's HTTP
	// listener refused because channels.web.maxConnections were open.
	// nanofleet_http_connections_refused_total; channel-gateway.
	HTTPConnectionsRefused prometheus.Counter
}

// Histogram buckets, in seconds. Turns run up to the worker's turn limit
// (10 minutes by default); a single model call rarely exceeds two.
var (
	turnBuckets  = []float64{0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}
	modelBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120}
)

// NewMetrics creates the fleet's metrics and registers them on reg. It
// panics if reg already holds metrics of the same names, so call it once
// per registry. A nil reg leaves the metrics unregistered, as in tests.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Turns: counterVec("nanofleet_turns_total", "Agent turns finished, by outcome.", "outcome"),
		TurnDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nanofleet_turn_duration_seconds",
			Help:    "Wall time of an agent turn, from lease to ack.",
			Buckets: turnBuckets,
		}),
		ModelRequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nanofleet_model_request_duration_seconds",
			Help:    "Latency of model requests, by provider and model.",
			Buckets: modelBuckets,
		}, []string{"provider", "model"}),
		ModelTokens:     counterVec("nanofleet_model_tokens_total", "Tokens reported by model providers, by provider, model and kind.", "provider", "model", "kind"),
		ToolCalls:       counterVec("nanofleet_tool_calls_total", "Tool calls, by tool and outcome.", "tool", "outcome"),
		SandboxRefusals: counterVec("nanofleet_sandbox_refusals_total", "Operations refused by the sandbox, by reason.", "reason"),
		ConsumerPending: gaugeVec("nanofleet_consumer_pending", "Messages pending delivery to a JetStream consumer.", "stream", "consumer"),
		LeaseContention: counter("nanofleet_lease_contention_total", "Messages put back because their session was leased by another turn."),
		Redeliveries:    counter("nanofleet_redeliveries_total", "Messages received more than once."),
		DeadLetters:     counterVec("nanofleet_dead_letters_total", "Messages moved to the dead-letter stream, by source.", "source"),
		DeliveryRetries: counterVec("nanofleet_delivery_retries_total", "Retried deliveries to chat platforms, by channel.", "channel"),
		HTTPConnectionsRefused: counter("nanofleet_http_connections_refused_total",
			"Connections to the gateway's HTTP listener refused because channels.web.maxConnections were open."),
	}
	if reg != nil {
		reg.MustRegister(m.collectors()...)
	}
	return m
}

// counter, counterVec and gaugeVec keep NewMetrics one line a metric.
func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.Turns, m.TurnDuration, m.ModelRequestDuration, m.ModelTokens,
		m.ToolCalls, m.SandboxRefusals, m.ConsumerPending, m.LeaseContention,
		m.Redeliveries, m.DeadLetters, m.DeliveryRetries, m.HTTPConnectionsRefused,
	}
}
