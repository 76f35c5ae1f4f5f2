package discordtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/gorilla/websocket"
)

type session struct {
	id     string
	seq    int
	events []event
	conn   *conn
}

type event struct {
	seq  int
	typ  string
	data json.RawMessage
}

type conn struct {
	ws *websocket.Conn
	mu sync.Mutex
}

func (c *conn) send(v any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ws.WriteJSON(v)
}

func dispatch(ev event) map[string]any {
	return map[string]any{"op": OpDispatch, "s": ev.seq, "t": ev.typ, "d": ev.data}
}

// gateway serves one gateway connection.
func (s *Server) gateway(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	refusing := s.refusing
	if refusing {
		s.refused++
	}
	s.mu.Unlock()
	if refusing {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &conn{ws: ws}
	s.mu.Lock()
	s.conns[c] = true
	s.accepted++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		for _, ss := range s.sessions {
			if ss.conn == c {
				ss.conn = nil
			}
		}
		s.mu.Unlock()
		_ = ws.Close()
	}()
	if c.send(map[string]any{"op": OpHello, "d": map[string]any{"heartbeat_interval": 1000}}) != nil {
		return
	}
	for {
		var msg struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if err := ws.ReadJSON(&msg); err != nil {
			return
		}
		switch msg.Op {
		case OpHeartbeat:
			_ = c.send(map[string]any{"op": OpHeartbeatACK})
		case OpIdentify:
			var id struct {
				Token   string `json:"token"`
				Intents int    `json:"intents"`
			}
			if json.Unmarshal(msg.D, &id) != nil || id.Token != s.Token {
				_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4004, "Authentication failed."))
				return
			}
			if id.Intents&s.Disallowed != 0 {
				_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4014, "Disallowed intent(s)."))
				return
			}
			s.mu.Lock()
			s.identifies++
			s.intents = id.Intents
			ss := &session{id: fmt.Sprintf("session-%d", s.identifies), conn: c}
			s.sessions[ss.id], s.current = ss, ss
			s.readied()
			ss.seq++
			ready := event{seq: ss.seq, typ: "READY", data: mustJSON(map[string]any{
				"v": 10, "user": s.user(), "session_id": ss.id, "guilds": []any{},
				"resume_gateway_url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/gateway",
				"application":        map[string]any{"id": s.BotID, "flags": 0},
			})}
			s.mu.Unlock()
			_ = c.send(dispatch(ready))
		case OpResume:
			var res struct {
				Token     string `json:"token"`
				SessionID string `json:"session_id"`
				Seq       int    `json:"seq"`
			}
			_ = json.Unmarshal(msg.D, &res)
			s.mu.Lock()
			ss := s.sessions[res.SessionID]
			if ss == nil || res.Token != s.Token {
				s.mu.Unlock()
				_ = c.send(map[string]any{"op": OpInvalidSession, "d": false})
				continue
			}
			s.resumes++
			ss.conn, s.current = c, ss
			s.readied()
			var missed []event
			for _, ev := range ss.events {
				if ev.seq > res.Seq {
					missed = append(missed, ev)
				}
			}
			ss.seq++
			resumed := event{seq: ss.seq, typ: "RESUMED", data: json.RawMessage(`{}`)}
			// Sent under the lock so that no new event overtakes the replay.
			for _, ev := range missed {
				_ = c.send(dispatch(ev))
			}
			_ = c.send(dispatch(resumed))
			s.mu.Unlock()
		}
	}
}

func mustJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}
