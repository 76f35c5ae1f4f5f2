package feishu

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/proto/feishu/pbbp2"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/eventsocket"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/hold"
)

// The long connection is held here rather than by the SDK's ws.Client:
// that client's Start never returns and cannot be stopped, so a gateway
// could neither give the connection up when it loses the lease nor shut
// down cleanly. The frames are the SDK's protobuf type, compiled here
// (frame.go).

// endpoint asks the open platform where to connect, and how often to
// ping.
func (a *Adapter) endpoint(ctx context.Context) (string, time.Duration, error) {
	reqBody, _ := json.Marshal(map[string]string{"AppID": a.cfg.AppID, "AppSecret": a.cfg.AppSecret})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+endpointPath, bytes.NewReader(reqBody))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("locale", "en")
	resp, err := a.http.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("endpoint: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", 0, fmt.Errorf("endpoint: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("endpoint: %s", resp.Status)
	}
	var ep endpointResponse
	if err := json.Unmarshal(raw, &ep); err != nil {
		return "", 0, fmt.Errorf("endpoint: %w", err)
	}
	switch {
	case ep.Code == codeForbidden || ep.Code == codeAuthFailed || ep.Code == codeNoLongConnection:
		// Wrong credentials, or the app may not use long connections.
		return "", 0, &hold.Fatal{Err: fmt.Errorf("feishu: long connection refused: code %d: %s", ep.Code, ep.Msg)}
	case ep.Code != codeOK || ep.Data == nil || ep.Data.URL == "":
		return "", 0, fmt.Errorf("endpoint: code %d: %s", ep.Code, ep.Msg)
	}
	ping := 2 * time.Minute
	if c := ep.Data.ClientConfig; c != nil && c.PingInterval > 0 {
		ping = config.SecondsDuration(c.PingInterval)
	}
	return ep.Data.URL, ping, nil
}

// connect holds one long connection until ctx ends or it breaks. Events
// are handled one at a time, in order, and answered after they were
// stored, so an event lost with the gateway is sent again.
func (a *Adapter) connect(ctx context.Context, in gateway.Inbox) error {
	addr, ping, err := a.endpoint(ctx)
	if err != nil {
		return err
	}
	u, err := url.Parse(addr)
	if err != nil {
		return fmt.Errorf("endpoint URL: %w", err)
	}
	service, _ := strconv.ParseInt(u.Query().Get(queryService), 10, 32)
	conn, err := eventsocket.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	a.log.Info("feishu long connection open", "device", u.Query().Get(queryDevice))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pings := make(chan time.Duration, 1)
	go a.pingLoop(ctx, conn, int32(service), ping, pings)

	parts := newAssembler()
	for {
		kind, data, err := conn.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read: %w", err)
		}
		if kind != websocket.MessageBinary {
			a.log.Warn("dropping non-binary Feishu frame", "raw", observe.Excerpt(data))
			continue
		}
		f := &pbbp2.Frame{}
		if err := proto.Unmarshal(data, f); err != nil {
			a.log.Warn("dropping malformed Feishu frame", "err", err, "raw", observe.Excerpt(data))
			continue
		}
		switch f.GetMethod() {
		case frameControl:
			if header(f, headerType) == typePong && len(f.Payload) > 0 {
				var c clientConfig
				if json.Unmarshal(f.Payload, &c) == nil && c.PingInterval > 0 {
					select {
					case pings <- config.SecondsDuration(c.PingInterval):
					default:
					}
				}
			}
			continue
		case frameData:
		default:
			continue
		}
		payload := parts.add(header(f, headerMessageID), headerInt(f, headerSum), headerInt(f, headerSeq), f.Payload)
		if payload == nil {
			continue
		}
		code := http.StatusOK
		if header(f, headerType) == typeEvent {
			start := time.Now()
			if err := a.handleEvent(ctx, in, payload); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				a.log.Error("feishu event not stored; the platform will send it again", "err", err)
				code = http.StatusInternalServerError
			}
			addHeader(f, headerBizRt, strconv.FormatInt(time.Since(start).Milliseconds(), 10))
		}
		f.Payload, _ = json.Marshal(frameResponse{StatusCode: code})
		out, err := proto.Marshal(f)
		if err != nil {
			return fmt.Errorf("encode response: %w", err)
		}
		if err := eventsocket.Write(ctx, conn, websocket.MessageBinary, out); err != nil {
			return fmt.Errorf("respond: %w", err)
		}
	}
}

// pingLoop pings at the interval the platform asks for; the platform
// drops connections that stop pinging.
func (a *Adapter) pingLoop(ctx context.Context, conn *websocket.Conn, service int32, every time.Duration, changes <-chan time.Duration) {
	frame, _ := proto.Marshal(pingFrame(service))
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-changes:
			every = d
			continue
		case <-t.C:
		}
		if err := eventsocket.Write(ctx, conn, websocket.MessageBinary, frame); err != nil {
			if ctx.Err() == nil {
				a.log.Warn("feishu ping failed", "err", err)
				_ = conn.CloseNow() // the read loop reconnects
			}
			return
		}
		t.Reset(every)
	}
}

// assembler joins events the platform split over several frames.
type assembler struct {
	pending map[string][][]byte
	order   []string
}

func newAssembler() *assembler { return &assembler{pending: map[string][][]byte{}} }

// maxPending bounds the split events waiting for their other parts.
const maxPending = 64

// add returns the whole payload once every part of id arrived, else nil.
func (s *assembler) add(id string, sum, seq int, part []byte) []byte {
	if sum <= 1 {
		return part
	}
	if seq < 0 || seq >= sum || sum > 1024 {
		return nil
	}
	buf, ok := s.pending[id]
	if !ok {
		if len(s.order) >= maxPending {
			delete(s.pending, s.order[0])
			s.order = s.order[1:]
		}
		buf = make([][]byte, sum)
		s.pending[id] = buf
		s.order = append(s.order, id)
	}
	if len(buf) != sum {
		return nil
	}
	buf[seq] = part
	for _, p := range buf {
		if p == nil {
			return nil
		}
	}
	delete(s.pending, id)
	for i, x := range s.order {
		if x == id {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	return bytes.Join(buf, nil)
}
