// Package whatsapptest is a fake WhatsApp for the adapter's tests: the far
// end of every connection the gateways dial through [Server.Dial]. WhatsApp's
// protocol (Noise handshake, Signal encryption) cannot be faked on the
// wire, so the fake sits behind whatsapp.Conn and speaks whatsmeow's own
// event and message types.
//
// Like WhatsApp with whatsmeow's synchronous acknowledgements, it keeps a
// message until a connected device has taken it: an event whose handler
// returned false (not stored), or that a connection ended before its
// handler could run, is given again to the next device that connects.
package whatsapptest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp"
)

// Phone is the linked account's number.
const Phone = "15550100"

// Account is the account's JID.
var Account = types.NewJID(Phone, types.DefaultUserServer)

// Sent is a message a gateway sent.
type Sent struct {
	To  types.JID
	Msg *waE2E.Message
	// Conn numbers the connection that sent it, from 1.
	Conn int
}

// Text is the message's text, plain or extended.
func (s Sent) Text() string {
	if t := s.Msg.GetConversation(); t != "" {
		return t
	}
	return s.Msg.GetExtendedTextMessage().GetText()
}

// Presence is a composing presence a gateway set.
type Presence struct {
	Chat types.JID
	On   bool
}

// Server is the fake.
type Server struct {
	Sent     chan Sent
	Presence chan Presence

	mu      sync.Mutex
	conns   int
	active  *conn
	pending []any
	unacked []any // handled and refused: given at the next connection
	files   map[string][]byte
	fail    []error
	linking *conn
	qrs     chan string
}

// New returns a fake with no connection.
func New() *Server {
	return &Server{
		Sent: make(chan Sent, 100), Presence: make(chan Presence, 100),
		files: map[string][]byte{}, qrs: make(chan string, 10),
	}
}

// Dial is the whatsapp.Dialer of the fake.
func (s *Server) Dial(ctx context.Context, dev *store.Device, h whatsapp.Handlers) (whatsapp.Conn, error) {
	s.mu.Lock()
	s.conns++
	s.pending, s.unacked = append(s.unacked, s.pending...), nil
	ctx, cancel := context.WithCancel(ctx)
	c := &conn{s: s, n: s.conns, h: h, dev: dev, ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	linking := dev.ID == nil
	if linking {
		s.linking = c
	} else {
		s.active = c
	}
	s.mu.Unlock()
	if linking {
		// Shown before anyone can scan it, as WhatsApp's first code is.
		code := fmt.Sprintf("2@fake-qr-%d", c.n)
		h.QR(code)
		s.qrs <- code
	} else {
		c.kick()
	}
	go c.run()
	return c, nil
}

// Scan links the device waiting for it, as a phone scanning its QR code
// would: the device gets the account's id and is saved.
func (s *Server) Scan(t testing.TB, timeout time.Duration) {
	t.Helper()
	select {
	case <-s.qrs:
	case <-time.After(timeout):
		t.Fatal("whatsapptest: no QR code shown")
	}
	s.mu.Lock()
	c := s.linking
	s.linking = nil
	s.mu.Unlock()
	id := types.NewADJID(Phone, 0, 7)
	c.dev.ID = &id
	c.dev.LID = types.NewJID("800100", types.HiddenUserServer)
	c.dev.PushName = "Fleet"
	if err := c.dev.Save(c.ctx); err != nil {
		t.Fatalf("whatsapptest: save linked device: %v", err)
	}
	c.h.Linked(id)
	s.mu.Lock()
	s.active = c
	s.mu.Unlock()
	c.kick()
}

// Emit gives evt to the connected device, or keeps it until one connects.
func (s *Server) Emit(evt any) {
	s.mu.Lock()
	s.pending = append(s.pending, evt)
	c := s.active
	s.mu.Unlock()
	if c != nil {
		c.kick()
	}
}

// LogOut unlinks the device from the phone: the connection ends with
// whatsapp.ErrLoggedOut, as whatsmeow's does on its LoggedOut event.
func (s *Server) LogOut() {
	s.mu.Lock()
	c := s.active
	s.active = nil
	if c != nil {
		c.ended = whatsapp.ErrLoggedOut
	}
	s.mu.Unlock()
	if c != nil {
		c.cancel()
	}
}

// File makes data downloadable at path (a media message's DirectPath).
func (s *Server) File(path string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = data
}

// FailSends makes the next sends fail with errs, in order.
func (s *Server) FailSends(errs ...error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = append(s.fail, errs...)
}

// Connections is how many connections were dialled.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Next returns the next sent message, failing the test after timeout.
func (s *Server) Next(t testing.TB, timeout time.Duration) Sent {
	t.Helper()
	select {
	case m := <-s.Sent:
		return m
	case <-time.After(timeout):
		t.Fatal("whatsapptest: nothing sent")
		return Sent{}
	}
}

// take removes the first pending event when c is the active connection.
func (s *Server) take(c *conn) (any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active != c || len(s.pending) == 0 {
		return nil, false
	}
	evt := s.pending[0]
	s.pending = s.pending[1:]
	return evt, true
}

// unack keeps an event its handler did not take for the next connection.
func (s *Server) unack(evt any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unacked = append(s.unacked, evt)
}

type conn struct {
	s      *Server
	ended  error // why the server ended the connection
	cancel context.CancelFunc
	n      int
	h      whatsapp.Handlers
	dev    *store.Device
	ctx    context.Context
	done   chan struct{}
	wake   chan struct{}
	once   sync.Once
}

func (c *conn) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run hands pending events to the handler in order until ctx ends.
func (c *conn) run() {
	defer c.once.Do(func() { close(c.done) })
	defer func() {
		c.s.mu.Lock()
		if c.s.active == c {
			c.s.active = nil
		}
		c.s.mu.Unlock()
	}()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
		}
		for {
			evt, ok := c.s.take(c)
			if !ok {
				break
			}
			if !c.h.Event(evt) {
				c.s.unack(evt)
			}
		}
	}
}

func (c *conn) Done() <-chan struct{} { return c.done }

func (c *conn) Err() error {
	select {
	case <-c.done:
		c.s.mu.Lock()
		defer c.s.mu.Unlock()
		if c.ended != nil {
			return c.ended
		}
		return c.ctx.Err()
	default:
		return nil
	}
}

func (c *conn) Send(ctx context.Context, to types.JID, msg *waE2E.Message) error {
	if c.ctx.Err() != nil {
		return whatsmeow.ErrNotConnected
	}
	c.s.mu.Lock()
	var err error
	if len(c.s.fail) > 0 {
		err, c.s.fail = c.s.fail[0], c.s.fail[1:]
	}
	c.s.mu.Unlock()
	if err != nil {
		return err
	}
	c.s.Sent <- Sent{To: to, Msg: proto.Clone(msg).(*waE2E.Message), Conn: c.n}
	return nil
}

func (c *conn) Composing(ctx context.Context, chat types.JID, on bool) error {
	select {
	case c.s.Presence <- Presence{chat, on}:
	default: // nobody is looking
	}
	return nil
}

func (c *conn) Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	data, ok := c.s.files[msg.GetDirectPath()]
	if !ok {
		return nil, errors.New("whatsapptest: no such media")
	}
	return data, nil
}

// Upload keeps data as a file the account's messages can point at: the
// fake does not encrypt, so DirectPath names the plaintext (see
// [Server.Uploaded]).
func (c *conn) Upload(ctx context.Context, data []byte, kind whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	path := fmt.Sprintf("/up/%d", len(c.s.files))
	c.s.files[path] = append([]byte(nil), data...)
	return whatsmeow.UploadResponse{URL: "https://mmg.test" + path, DirectPath: path, MediaKey: []byte("key"), FileLength: uint64(len(data))}, nil
}

// Uploaded returns the data uploaded at a message's DirectPath.
func (s *Server) Uploaded(path string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files[path]
}

// Message is an incoming message event.
func Message(id string, chat, sender types.JID, m *waE2E.Message) *events.Message {
	return &events.Message{
		Info: types.MessageInfo{
			MessageSource: types.MessageSource{Chat: chat, Sender: sender, IsGroup: chat.Server == types.GroupServer},
			ID:            id, PushName: "User " + sender.User, Timestamp: time.Now(),
		},
		Message: m,
	}
}

// DM is a text message in the direct chat with from.
func DM(id, from, text string) *events.Message {
	jid := types.NewJID(from, types.DefaultUserServer)
	return Message(id, jid, jid, &waE2E.Message{Conversation: proto.String(text)})
}

// Group is a text message from from in group, mentioning the account when
// mention is set.
func Group(id, group, from, text string, mention bool) *events.Message {
	ci := &waE2E.ContextInfo{}
	if mention {
		ci.MentionedJID = []string{Account.String()}
		text = "@" + Phone + " " + text
	}
	return Message(id, types.NewJID(group, types.GroupServer), types.NewJID(from, types.DefaultUserServer),
		&waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String(text), ContextInfo: ci}})
}
