package webchat

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/nanofleet/nanofleet/pkg/metakey"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/httpjson"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/watch"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// maxText bounds a typed message.
const maxText = 64 << 10

// request is what the page sends.
type request struct {
	Type  string `json:"type"` // "send"
	Text  string `json:"text"`
	Files []struct {
		Object string `json:"object"`
	} `json:"files"`
}

// frame is what the page receives.
type frame struct {
	Type string `json:"type"` // accepted, delta, progress, tool_hint, final, message, error
	ID   string `json:"id,omitempty"`
	// Reply is the id of the message being answered.
	Reply string `json:"reply,omitempty"`
	Text  string `json:"text,omitempty"`
	HTML  string `json:"html,omitempty"`
}

// socket connects the page to one conversation: it publishes what the user
// sends and streams back what the fleet answers.
func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validID(id) {
		httpjson.Write(w, http.StatusNotFound, map[string]string{"error": "no such conversation"})
		return
	}
	// Accept checks that the Origin is this host or an allowed origin's.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: s.cfg.originHosts()})
	if err != nil {
		s.log.Debug("web socket refused", "err", err)
		return
	}
	defer func() { _ = c.CloseNow() }()
	c.SetReadLimit(maxText + 16<<10)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	wch, err := watch.New(ctx, s.deps.Bus, Channel, id, watch.WithLogger(s.log))
	if err != nil {
		s.log.Error("web socket watch", "err", err)
		_ = c.Close(websocket.StatusInternalError, "cannot follow the conversation")
		return
	}
	// It ends with ctx (cancelled when the socket closes), deleting its
	// consumer after this handler returned.
	go func() { _ = wch.Run(ctx) }()
	go func() {
		defer cancel()
		for {
			select {
			case <-ctx.Done():
				return
			case out := <-wch.C:
				f, ok := s.frame(out)
				if !ok {
					continue
				}
				f.Reply = out.GetReplyTo()
				if err := wsjson.Write(ctx, c, f); err != nil {
					return
				}
			}
		}
	}()
	for {
		var req request
		if err := wsjson.Read(ctx, c, &req); err != nil {
			if websocket.CloseStatus(err) == -1 && !errors.Is(err, context.Canceled) {
				s.log.Debug("web socket read", "err", err)
			}
			return
		}
		if req.Type != "send" {
			continue
		}
		f, err := s.send(ctx, id, req)
		if err != nil {
			f = frame{Type: "error", Text: err.Error()}
		}
		if err := wsjson.Write(ctx, c, f); err != nil {
			return
		}
	}
}

// send publishes one message of the user.
func (s *Server) send(ctx context.Context, id string, req request) (frame, error) {
	text := strings.TrimSpace(req.Text)
	if len(text) > maxText {
		return frame{}, userError("That message is too long.")
	}
	in := &nanofleetv1.InboundMessage{
		Id: "web-" + randID(), Channel: Channel, ChatId: id, SenderId: "web", SenderName: "web user", Content: text,
		Metadata: map[string]string{metakey.Stream: "true"}, // the page shows deltas
	}
	for _, f := range req.Files {
		if !strings.HasPrefix(f.Object, "web/"+id+"/") {
			return frame{}, userError("An attachment does not belong to this conversation.")
		}
		ref, err := s.media.Info(ctx, f.Object)
		if err != nil {
			return frame{}, userError("An attachment is no longer available; attach it again.")
		}
		in.Media = append(in.Media, ref)
	}
	if text == "" && len(in.Media) == 0 {
		return frame{}, userError("Nothing to send.")
	}
	if err := s.deps.Inbox.Publish(ctx, in); err != nil {
		s.log.Error("web message not published", "err", err)
		if text := gateway.RefusalText(err); text != "" {
			return frame{}, userError(text)
		}
		return frame{}, userError("The message could not be sent; try again.")
	}
	// After the publish: a refused message (a full store, where this
	// write would wait for its timeout) leaves the conversation as it was.
	s.touch(ctx, id, text)
	return frame{Type: "accepted", ID: in.GetId()}, nil
}

// frame turns a reply or live message into what the page shows.
func (s *Server) frame(out *nanofleetv1.OutboundMessage) (frame, bool) {
	switch out.GetKind() {
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA:
		return frame{Type: "delta", Text: out.GetContent()}, true
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS:
		return frame{Type: "progress", Text: out.GetContent()}, s.show.progress
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT:
		return frame{Type: "tool_hint", Text: out.GetContent()}, s.show.hints
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL:
		return frame{Type: "final", Text: out.GetContent(), HTML: markup.HTML(out.GetContent())}, true
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE:
		return frame{Type: "message", Text: out.GetContent(), HTML: markup.HTML(out.GetContent())}, true
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR:
		return frame{Type: "error", Text: out.GetContent()}, true
	}
	return frame{}, false
}

func randID() string { return strings.ToLower(rand.Text()[:16]) }
