package feishutest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"
)

// Send sends an event (the whole schema 2.0 JSON object) as one data
// frame and returns the frame's message id.
func (s *Server) Send(t testing.TB, event map[string]any) string {
	t.Helper()
	data, err := json.Marshal(event)
	if err != nil {
		t.Fatalf("feishutest: %v", err)
	}
	return s.SendPayload(t, data, 1)
}

// SendPayload sends payload as an event split over parts data frames, as
// the platform splits large events, and returns their message id.
func (s *Server) SendPayload(t testing.TB, payload []byte, parts int) string {
	t.Helper()
	s.mu.Lock()
	s.frames++
	id := fmt.Sprintf("msg-%d", s.frames)
	s.mu.Unlock()
	size := (len(payload) + parts - 1) / parts
	for i := range parts {
		chunk := payload[min(i*size, len(payload)):min((i+1)*size, len(payload))]
		f := larkws.Frame{
			SeqID: uint64(i), Service: 1, Method: int32(larkws.FrameTypeData),
			Headers: []larkws.Header{
				{Key: larkws.HeaderType, Value: string(larkws.MessageTypeEvent)},
				{Key: larkws.HeaderMessageID, Value: id},
				{Key: larkws.HeaderTraceID, Value: "trace-" + id},
				{Key: larkws.HeaderSum, Value: strconv.Itoa(parts)},
				{Key: larkws.HeaderSeq, Value: strconv.Itoa(i)},
			},
			Payload: chunk,
		}
		data, err := f.Marshal()
		if err != nil {
			t.Fatalf("feishutest: %v", err)
		}
		s.Raw(t, data)
	}
	return id
}

// Raw writes a raw binary message on the long connection.
func (s *Server) Raw(t testing.TB, data []byte) {
	t.Helper()
	s.Link.Write(t, websocket.MessageBinary, data)
}

// WaitAck waits until the client answered the event frame id, and returns
// the code it answered with.
func (s *Server) WaitAck(t testing.TB, id string, timeout time.Duration) int {
	t.Helper()
	return s.acks.Next(t, timeout, id).Code
}

func (s *Server) serveEndpoint(w http.ResponseWriter, r *http.Request) {
	var req struct{ AppID, AppSecret string }
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !strings.HasPrefix(req.AppID, "cli_") || req.AppSecret != AppSecret {
		writeJSON(w, http.StatusOK, map[string]any{"code": 1000040351, "msg": "invalid app credentials"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "data": map[string]any{
		"URL":          "ws" + strings.TrimPrefix(s.URL, "http") + "/ws?device_id=dev1&service_id=7",
		"ClientConfig": map[string]any{"ReconnectCount": -1, "ReconnectInterval": 1, "ReconnectNonce": 0, "PingInterval": s.pingInterval()},
	}})
}

func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("device_id") == "" {
		http.Error(w, "no device", http.StatusBadRequest)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	c.SetReadLimit(16 << 20)
	defer s.Link.Open(c)() // the platform keeps one connection per client here
	ctx := r.Context()
	for {
		kind, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var f larkws.Frame
		if kind != websocket.MessageBinary || f.Unmarshal(data) != nil {
			continue
		}
		hs := larkws.Headers(f.Headers)
		switch larkws.FrameType(f.Method) {
		case larkws.FrameTypeControl:
			if larkws.MessageType(hs.GetString(larkws.HeaderType)) == larkws.MessageTypePing {
				s.mu.Lock()
				s.pings++
				s.mu.Unlock()
				pong := larkws.Frame{Service: f.Service, Method: int32(larkws.FrameTypeControl),
					Headers: []larkws.Header{{Key: larkws.HeaderType, Value: string(larkws.MessageTypePong)}}}
				pong.Payload, _ = json.Marshal(larkws.ClientConfig{ReconnectCount: -1, ReconnectInterval: 1, PingInterval: s.pingInterval()})
				out, _ := pong.Marshal()
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_ = c.Write(wctx, websocket.MessageBinary, out)
				cancel()
			}
		case larkws.FrameTypeData:
			var resp larkws.Response
			if json.Unmarshal(f.Payload, &resp) == nil {
				s.acks.Add(Ack{MessageID: hs.GetString(larkws.HeaderMessageID), Code: resp.StatusCode})
			}
		}
	}
}

func (s *Server) pingInterval() int { return cmp.Or(s.PingInterval, 1) }

// Pings is how many pings the clients sent.
func (s *Server) Pings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pings
}

// Ack is the client's response to an event frame.
type Ack struct {
	MessageID string
	Code      int
}
