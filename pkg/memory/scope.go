package memory

import (
	"fmt"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Scope kinds.
const (
	KindAgent   = "agent"
	KindUser    = "user"
	KindSession = "session"
)

// Scope names whose memory something is.
type Scope struct {
	// Kind is KindAgent, KindUser or KindSession.
	Kind string
	// Agent the memory belongs to.
	Agent string
	// ID is the person (user scope) or session key (session scope); empty
	// in agent scope.
	ID string
}

// AgentScope is the shared memory of an agent.
func AgentScope(agent string) Scope { return Scope{Kind: KindAgent, Agent: agent} }

// UserScope is one person's memory with an agent.
func UserScope(agent, person string) Scope { return Scope{Kind: KindUser, Agent: agent, ID: person} }

// SessionScope is one conversation's memory.
func SessionScope(agent, sessionKey string) Scope {
	return Scope{Kind: KindSession, Agent: agent, ID: sessionKey}
}

// Key is the scope's three-token key "<kind>.<agent>.<id>" (tokens encoded
// by subject.Token), used in KV keys and subjects.
func (s Scope) Key() string {
	return s.Kind + "." + subject.Token(s.Agent) + "." + subject.Token(s.ID)
}

// String is the scope for people: "agent default", "user ada", "session
// telegram:42".
func (s Scope) String() string {
	if s.Kind == KindAgent {
		return "agent " + s.Agent
	}
	return s.Kind + " " + s.ID
}

// Valid reports whether the scope can be stored.
func (s Scope) Valid() error {
	switch s.Kind {
	case KindAgent:
		if s.ID != "" {
			return fmt.Errorf("%w: agent scope with id %q", ErrBadScope, s.ID)
		}
	case KindUser, KindSession:
		if s.ID == "" {
			return fmt.Errorf("%w: %s scope without id", ErrBadScope, s.Kind)
		}
	default:
		return fmt.Errorf("%w: kind %q", ErrBadScope, s.Kind)
	}
	if s.Agent == "" {
		return fmt.Errorf("%w: no agent", ErrBadScope)
	}
	return nil
}

// ParseScope reverses [Scope.Key].
func ParseScope(key string) (Scope, error) {
	parts := strings.Split(key, ".")
	if len(parts) != 3 {
		return Scope{}, fmt.Errorf("%w: key %q is not <kind>.<agent>.<id>", ErrBadScope, key)
	}
	agent, err := subject.ParseToken(parts[1])
	if err != nil {
		return Scope{}, fmt.Errorf("%w: agent of %q: %v", ErrBadScope, key, err)
	}
	id, err := subject.ParseToken(parts[2])
	if err != nil {
		return Scope{}, fmt.Errorf("%w: id of %q: %v", ErrBadScope, key, err)
	}
	s := Scope{Kind: parts[0], Agent: agent, ID: id}
	if err := s.Valid(); err != nil {
		return Scope{}, err
	}
	return s, nil
}

// ParseScopeName reads a scope as an operator writes it: "agent",
// "user:<person>" or "session:<session key>".
func ParseScopeName(agent, name string) (Scope, error) {
	kind, id, _ := strings.Cut(name, ":")
	s := Scope{Kind: kind, Agent: agent, ID: id}
	if err := s.Valid(); err != nil {
		return Scope{}, fmt.Errorf("scope %q (want agent, user:<person> or session:<key>): %w", name, err)
	}
	return s, nil
}

// IsGroup reports whether an inbound message comes from a group chat, as
// the channel's metadata says.
func IsGroup(in *nanofleetv1.InboundMessage) bool {
	md := in.GetMetadata()
	switch md["chat_type"] {
	case "group", "supergroup", "channel":
		return true
	}
	switch md["channel_type"] {
	case "channel", "group", "mpim":
		return true
	}
	return md[metakey.IsGroup] == "true"
}
