package telegramtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Conflicts is how often a second concurrent getUpdates was refused.
func (s *Server) Conflicts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conflicts
}

// Push queues a raw update (any JSON, also malformed) for getUpdates; id
// orders it and decides when an offset confirms it.
func (s *Server) Push(id int64, raw string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, json.RawMessage(raw))
	s.ids = append(s.ids, id)
	close(s.newUpdate)
	s.newUpdate = make(chan struct{})
}

// Message is a text message update in a chat.
type Message struct {
	UpdateID  int64
	MessageID int
	ChatID    int64
	ChatType  string // "private" (default), "group", "supergroup"
	FromID    int64
	Username  string
	Text      string
	// Extra is merged into the message object, e.g. a "photo" array.
	Extra map[string]any
}

// JSON renders the update as Telegram sends it.
func (m Message) JSON() string {
	if m.ChatType == "" {
		m.ChatType = "private"
	}
	msg := map[string]any{
		"message_id": m.MessageID,
		"date":       time.Now().Unix(),
		"chat":       map[string]any{"id": m.ChatID, "type": m.ChatType},
		"from":       map[string]any{"id": m.FromID, "is_bot": false, "first_name": "User" + strconv.FormatInt(m.FromID, 10), "username": m.Username},
	}
	if m.Text != "" {
		msg["text"] = m.Text
	}
	for k, v := range m.Extra {
		msg[k] = v
	}
	data, _ := json.Marshal(map[string]any{"update_id": m.UpdateID, "message": msg})
	return string(data)
}

// Send queues a message update.
func (s *Server) Send(m Message) { s.Push(m.UpdateID, m.JSON()) }

func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, c Call) {
	offset, _ := strconv.ParseInt(c.Fields["offset"], 10, 64)
	timeout, _ := strconv.Atoi(c.Fields["timeout"])
	s.mu.Lock()
	if s.polling {
		s.conflicts++
		s.mu.Unlock()
		reply(w, 409, nil, Failure{Code: 409, Description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"})
		return
	}
	s.polling = true
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.polling = false; s.mu.Unlock() }()

	deadline := time.After(time.Duration(timeout) * time.Second)
	for {
		s.mu.Lock()
		// An offset confirms every update before it.
		keepU, keepI := s.updates[:0:0], s.ids[:0:0]
		for i, id := range s.ids {
			if offset == 0 || id >= offset {
				keepU, keepI = append(keepU, s.updates[i]), append(keepI, id)
			}
		}
		s.updates, s.ids = keepU, keepI
		pending := append([]json.RawMessage(nil), s.updates...)
		wake := s.newUpdate
		s.mu.Unlock()
		if len(pending) > 0 {
			reply(w, 200, pending, Failure{})
			return
		}
		select {
		case <-wake:
		case <-deadline:
			reply(w, 200, []json.RawMessage{}, Failure{})
			return
		case <-r.Context().Done():
			return
		}
	}
}
