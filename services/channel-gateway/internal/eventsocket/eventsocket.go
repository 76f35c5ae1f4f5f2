// Package eventsocket opens and writes the WebSocket connections over
// which platforms push their events (DingTalk's stream, Feishu's long
// connection), with the bounds every such connection is held to: a
// handshake that cannot hang, frames up to 16 MiB, and writes (answers,
// pings) that give up after 10 seconds so that a stalled connection is
// noticed and replaced.
package eventsocket

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/coder/websocket"
)

const (
	// handshakeTimeout bounds the HTTP upgrade.
	handshakeTimeout = 30 * time.Second
	// readLimit bounds what one frame can make the gateway buffer.
	readLimit = 16 << 20
	// writeTimeout bounds a write or ping.
	writeTimeout = 10 * time.Second
)

// Dial connects to addr, as the platform's endpoint call gave it. The
// caller closes the connection.
func Dial(ctx context.Context, addr string) (*websocket.Conn, error) {
	conn, _, err := websocket.Dial(ctx, addr, &websocket.DialOptions{HTTPClient: &http.Client{Timeout: handshakeTimeout}})
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	conn.SetReadLimit(readLimit)
	return conn, nil
}

// Write sends one message of kind on conn, giving up after the write
// timeout.
func Write(ctx context.Context, conn *websocket.Conn, kind websocket.MessageType, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return conn.Write(ctx, kind, data)
}

// Ping checks that the peer still answers, giving up after the write
// timeout.
func Ping(ctx context.Context, conn *websocket.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return conn.Ping(ctx)
}
