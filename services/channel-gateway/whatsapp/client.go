package whatsapp

import (
	"context"
	"crypto/aes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	waLog "go.mau.fi/whatsmeow/util/log"

	"github.com/nanofleet/nanofleet/pkg/httplimit"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

// Conn is the part of a connected whatsmeow client the adapter uses:
// messages and presence out, media in. Events come in through the
// [Handlers] given to the [Dialer]. It exists so that the adapter can be
// tested end to end without WhatsApp's servers, whose protocol cannot be
// faked.
type Conn interface {
	// Send sends msg to a chat.
	Send(ctx context.Context, to types.JID, msg *waE2E.Message) error
	// Composing turns the "typing…" presence in chat on or off.
	Composing(ctx context.Context, chat types.JID, on bool) error
	// Download fetches and decrypts a message's media.
	Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error)
	// Upload encrypts and uploads media of a kind, for a message that
	// carries it.
	Upload(ctx context.Context, data []byte, kind whatsmeow.MediaType) (whatsmeow.UploadResponse, error)
	// Done is closed when the connection has ended for good (ctx ended,
	// logged out, replaced by another client, linking failed); Err then
	// says why.
	Done() <-chan struct{}
	Err() error
}

// Handlers receive what a connection reports.
type Handlers struct {
	// Event receives whatsmeow's events (*events.Message among them) in
	// order, one at a time. It returns false for a message it could not
	// store: the message is then not acknowledged, and WhatsApp gives it
	// again at the next connection.
	Event func(evt any) (taken bool)
	// QR receives each QR code to show while the device is being linked.
	QR func(code string)
	// Linked is called when the QR code was scanned and the device saved.
	Linked func(id types.JID)
}

// Dialer connects dev until ctx ends, linking it by QR code first when it
// has no id yet.
type Dialer func(ctx context.Context, dev *store.Device, h Handlers) (Conn, error)

// whatsmeowDialer is the adapter's [Dialer]: it connects to WhatsApp with
// whatsmeow, which logs to log on the adapter's behalf, and downloads
// media of at most limit bytes. Unexported: it is the default
// [WithDialer] replaces, not a component of its own.
func whatsmeowDialer(log *slog.Logger, limit int64) Dialer {
	return func(ctx context.Context, dev *store.Device, h Handlers) (Conn, error) {
		cli := whatsmeow.NewClient(dev, logger{log})
		cli.SetMediaHTTPClient(&http.Client{Transport: httplimit.Transport(http.DefaultTransport.(*http.Transport).Clone(), limit+encryptionOverhead, media.ErrTooLarge)})
		// A message is acknowledged only after the handler returns, and
		// not when it returns false: WhatsApp then gives it again at the
		// next connection, and whatsmeow replays it from the decrypted
		// event buffer (kvstore keeps it), since the Signal session has
		// moved past it. By default whatsmeow acknowledges on receipt,
		// and a message the fleet could not store was lost.
		cli.SynchronousAck = true
		cli.EnableDecryptedEventBuffer = true
		c := &client{cli: cli, done: make(chan struct{})}
		cli.AddEventHandlerWithSuccessStatus(func(evt any) bool {
			switch e := evt.(type) {
			case *events.LoggedOut:
				c.end(ErrLoggedOut)
			case *events.StreamReplaced:
				c.end(errors.New("whatsapp: another client connected as this device"))
			case *events.PairSuccess:
				if h.Linked != nil {
					h.Linked(e.ID)
				}
			}
			return h.Event(evt)
		})
		if cli.Store.ID == nil {
			qrs, err := cli.GetQRChannel(ctx)
			if err != nil {
				return nil, fmt.Errorf("whatsapp: QR channel: %w", err)
			}
			go func() {
				for item := range qrs {
					switch {
					case item.Event == whatsmeow.QRChannelEventCode:
						h.QR(item.Code)
					case item == whatsmeow.QRChannelSuccess:
					case item.Event == whatsmeow.QRChannelEventError:
						c.end(fmt.Errorf("whatsapp: linking failed: %w", item.Error))
					default:
						c.end(fmt.Errorf("whatsapp: linking ended: %s", item.Event))
					}
				}
			}()
		}
		if err := cli.Connect(); err != nil {
			return nil, fmt.Errorf("whatsapp: connect: %w", err)
		}
		go func() {
			select {
			case <-ctx.Done():
				c.end(ctx.Err())
			case <-c.done:
			}
			cli.Disconnect()
		}()
		return c, nil
	}
}

// client is a [Conn] over a whatsmeow client.
type client struct {
	cli  *whatsmeow.Client
	once sync.Once
	done chan struct{}
	err  error
}

func (c *client) end(err error) {
	c.once.Do(func() {
		c.err = err
		close(c.done)
	})
}

func (c *client) Done() <-chan struct{} { return c.done }

func (c *client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

func (c *client) Send(ctx context.Context, to types.JID, msg *waE2E.Message) error {
	_, err := c.cli.SendMessage(ctx, to, msg)
	return err
}

func (c *client) Composing(ctx context.Context, chat types.JID, on bool) error {
	state := types.ChatPresencePaused
	if on {
		state = types.ChatPresenceComposing
	}
	return c.cli.SendChatPresence(ctx, chat, state, types.ChatPresenceMediaText)
}

// Download fetches msg's media by its direct path from the media hosts
// WhatsApp's server names, never from the message's URL: the sender
// writes the message, and whatsmeow's Download fetches a URL from any
// host (as plain bytes when the message has no media key), which would
// let a chat user make the gateway read its own network.
func (c *client) Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error) {
	kind := whatsmeow.GetMediaType(msg)
	if kind == "" {
		return nil, fmt.Errorf("%w %T", whatsmeow.ErrUnknownMediaType, msg)
	}
	size := -1
	if m, ok := msg.(interface{ GetFileLength() uint64 }); ok {
		size = int(m.GetFileLength())
	}
	return c.cli.DownloadMediaWithPath(ctx, msg.GetDirectPath(), msg.GetFileEncSHA256(), msg.GetFileSHA256(), msg.GetMediaKey(), size, kind, "")
}

func (c *client) Upload(ctx context.Context, data []byte, kind whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	return c.cli.Upload(ctx, data, kind)
}

// encryptionOverhead is what encrypted media add to the file: AES-CBC
// padding and the 10-byte MAC.
const encryptionOverhead = aes.BlockSize + 10

// logger adapts slog to whatsmeow's logger; whatsmeow's info lines are
// chatty protocol detail, so they are logged at debug.
type logger struct{ l *slog.Logger }

func (l logger) Warnf(msg string, args ...any)  { l.l.Warn(fmt.Sprintf(msg, args...)) }
func (l logger) Errorf(msg string, args ...any) { l.l.Error(fmt.Sprintf(msg, args...)) }
func (l logger) Infof(msg string, args ...any)  { l.l.Debug(fmt.Sprintf(msg, args...)) }
func (l logger) Debugf(msg string, args ...any) { l.l.Debug(fmt.Sprintf(msg, args...)) }
func (l logger) Sub(module string) waLog.Logger { return logger{l.l.With("module", module)} }
