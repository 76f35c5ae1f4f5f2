package webchat

import (
	"net/http"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/httpjson"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// entry is one message as the page shows it.
type entry struct {
	Role  string   `json:"role"` // "user", "assistant" or "error"
	Text  string   `json:"text,omitempty"`
	HTML  string   `json:"html,omitempty"`
	Hints []string `json:"hints,omitempty"`
	Files []string `json:"files,omitempty"`
}

// messages serves a conversation's history from the session store.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validID(id) {
		httpjson.Write(w, http.StatusNotFound, map[string]string{"error": "no such conversation"})
		return
	}
	h, err := s.deps.Sessions.LoadHistory(r.Context(), session.Key(Channel, id), 0)
	if err != nil {
		s.fail(w, err)
		return
	}
	out := []entry{}
	for _, t := range h.Turns {
		out = append(out, entries(t.Record)...)
	}
	httpjson.Write(w, http.StatusOK, out)
}

// entries turns a committed turn into what the page shows: the user's
// message, tool calls as hints, and the assistant's answer.
func entries(rec *nanofleetv1.TurnRecord) []entry {
	var out []entry
	var hints []string
	answered := false
	for _, m := range rec.GetMessages() {
		switch m.GetRole() {
		case "user":
			e := entry{Role: "user", Text: m.GetContent()}
			for _, f := range m.GetMedia() {
				e.Files = append(e.Files, f.GetName())
			}
			out = append(out, e)
		case "assistant":
			for _, c := range m.GetToolCalls() {
				hints = append(hints, hint(c))
			}
			if strings.TrimSpace(m.GetContent()) != "" {
				out = append(out, entry{Role: "assistant", HTML: markup.HTML(m.GetContent()), Hints: hints})
				hints, answered = nil, true
			}
		}
	}
	if !answered {
		for _, r := range rec.GetReplies() {
			switch r.GetKind() {
			case nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE:
				out = append(out, entry{Role: "assistant", HTML: markup.HTML(r.GetContent()), Hints: hints})
				hints = nil
			case nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR:
				out = append(out, entry{Role: "error", Text: r.GetContent()})
			}
		}
	}
	return out
}

func hint(c *nanofleetv1.ToolCall) string {
	return c.GetName() + " " + textcut.Line(c.GetArgumentsJson(), 119)
}
