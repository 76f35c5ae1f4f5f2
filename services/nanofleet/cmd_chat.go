package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

func chatCmd(ctx context.Context, env *environment, args []string) error {
	var c common
	var sess string
	line := &cmd{name: "chat", summary: "Chat in the terminal: with the running fleet, else with a fleet of its own until it exits. /stop stops the running turn; Ctrl-D or /exit leaves.",
		flags: func(fs *flag.FlagSet) {
			env.register(fs, &c)
			fs.StringVar(&sess, "session", "cli:direct", "session `key`")
		}}
	if _, err := line.parse(env.stdout, args); err != nil {
		return err
	}
	return runChat(ctx, env, &c, "chat", sess)
}

// runChat chats in session sess until the input ends; command is the
// command that runs it ("chat", or "agent" without -m).
func runChat(ctx context.Context, env *environment, c *common, command, sess string) error {
	cv, err := openConversation(ctx, env, c, command, sess)
	if err != nil {
		return err
	}
	defer cv.close(ctx)
	fmt.Fprintf(env.stdout, "nanofleet chat — session %s. /help for commands, Ctrl-D to leave.\n", sess)
	ch := &chat{cv: cv, env: env, lines: readLines(ctx, bufio.NewReader(env.stdin))}
	return ch.run(ctx)
}

// chat is an interactive conversation in the terminal.
type chat struct {
	cv    *conversation
	env   *environment
	lines <-chan chatLine
	// ahead holds what was typed while a turn ran, to be sent after it.
	ahead []chatLine
}

// run reads and sends lines until the input ends, /exit, or ctx ends.
func (c *chat) run(ctx context.Context) error {
	for {
		fmt.Fprint(c.env.stdout, "› ")
		l, ok := c.next(ctx)
		if !ok {
			// Interrupted at the prompt: a read of the terminal cannot
			// be cancelled, so it is left to the process's end.
			fmt.Fprintln(c.env.stdout)
			return nil
		}
		if errors.Is(l.err, errLineTooLong) {
			// One message lost is better than the whole chat.
			fmt.Fprintf(c.env.stderr, "error: a message is at most %d bytes; that one was not sent\n", maxChatLine)
			continue
		}
		if l.err != nil {
			fmt.Fprintln(c.env.stdout)
			if errors.Is(l.err, io.EOF) {
				return nil
			}
			return l.err
		}
		text := strings.TrimSpace(l.text)
		if text == "" {
			continue
		}
		if text == "/exit" || text == "/quit" {
			return nil
		}
		if err := c.turn(ctx, text); err != nil {
			return err
		}
	}
}

// next is the next line: one typed ahead, or the next read; false when
// ctx ends first.
func (c *chat) next(ctx context.Context) (chatLine, bool) {
	if len(c.ahead) > 0 {
		l := c.ahead[0]
		c.ahead = c.ahead[1:]
		return l, true
	}
	select {
	case l := <-c.lines:
		return l, true
	case <-ctx.Done():
		return chatLine{}, false
	}
}

// turn sends text and prints the answer. Once the message is stored it
// reads on: /stop goes to the fleet at once, as on every channel (it was
// read only once the turn it was meant to stop had ended); other lines
// wait for the answer. Interrupted, it says where the answer will be and
// returns errInterrupted.
func (c *chat) turn(ctx context.Context, text string) error {
	// Sent before reading on: a /stop typed (or pasted) with the line went
	// out first and was answered "No turn is running now", and the turn
	// it was meant to stop ran to its end.
	sent, err := c.cv.send(ctx, text, c.env.stderr)
	switch {
	case err != nil && ctx.Err() != nil:
		return c.interrupted()
	case err != nil:
		fmt.Fprintln(c.env.stderr, "error:", err)
		return nil
	}
	type answer struct {
		out *nanofleetv1.OutboundMessage
		err error
	}
	done := make(chan answer, 1)
	go func() {
		out, err := sent.answer(ctx)
		done <- answer{out, err}
	}()
	var stops []*fleet.Pending
	lines := c.lines
	for {
		select {
		case a := <-done:
			switch {
			case a.err != nil && ctx.Err() != nil:
				return c.interrupted()
			case a.err != nil:
				fmt.Fprintln(c.env.stderr, "error:", a.err)
			default:
				fmt.Fprintf(c.env.stdout, "%s\n\n", a.out.GetContent())
			}
			return c.stopped(ctx, stops)
		case l := <-lines:
			if l.err == nil && isStop(l.text) {
				p, err := c.cv.client.Send(ctx, c.cv.request("/stop"))
				if err != nil {
					fmt.Fprintln(c.env.stderr, "error: /stop not sent:", err)
					continue
				}
				stops = append(stops, p)
				continue
			}
			c.ahead = append(c.ahead, l)
			if l.err != nil && !errors.Is(l.err, errLineTooLong) {
				lines = nil // the reader has stopped
			}
		case <-ctx.Done():
			return c.interrupted()
		}
	}
}

// stopped prints the answers to the /stop commands sent during a turn.
func (c *chat) stopped(ctx context.Context, stops []*fleet.Pending) error {
	for _, p := range stops {
		wctx, cancel := context.WithTimeout(ctx, stopAnswerWait)
		replies, err := p.Wait(wctx)
		cancel()
		if ctx.Err() != nil {
			return c.interrupted()
		}
		out, ferr := fleet.Final(replies)
		if err := cmp.Or(err, ferr); err != nil {
			fmt.Fprintln(c.env.stderr, "error: /stop:", err)
			continue
		}
		fmt.Fprintf(c.env.stdout, "%s\n\n", out.GetContent())
	}
	return nil
}

// stopAnswerWait bounds the wait for a /stop's own answer, which the
// fleet gives right after the stopped turn's.
const stopAnswerWait = 30 * time.Second

// interrupted tells the user where the turn goes on without them.
func (c *chat) interrupted() error {
	fmt.Fprintln(c.env.stdout)
	if c.cv.lock != nil {
		// The fleet was this chat's own, and stops with it.
		fmt.Fprintln(c.env.stderr, "nanofleet: the turn resumes when a fleet next runs on this data directory; /history in this session then shows its answer")
	} else {
		fmt.Fprintln(c.env.stderr, "nanofleet: the turn goes on in the fleet; /history in this session shows its answer")
	}
	return errInterrupted
}

// isStop reports whether a typed line is the /stop command.
func isStop(text string) bool {
	f := strings.Fields(text)
	return len(f) > 0 && f[0] == "/stop"
}

// chatLine is one line read for chat, or why none could be.
type chatLine struct {
	text string
	err  error
}

// readLines reads r's lines (readLine) on a goroutine of its own, so that
// chat can leave while a read waits; it stops after an error other than
// an overlong line, or when ctx ends.
func readLines(ctx context.Context, r *bufio.Reader) <-chan chatLine {
	lines := make(chan chatLine)
	go func() {
		for {
			text, err := readLine(r, maxChatLine)
			select {
			case lines <- chatLine{text, err}:
			case <-ctx.Done():
				return
			}
			if err != nil && !errors.Is(err, errLineTooLong) {
				return
			}
		}
	}()
	return lines
}

// maxChatLine bounds a message typed or piped into chat.
const maxChatLine = 1 << 20

// errLineTooLong is a line over readLine's limit, read past and dropped.
var errLineTooLong = errors.New("line too long")

// readLine returns r's next line without its end. A line over limit bytes
// is read to its end and reported as errLineTooLong, so that the next
// call reads the line after it; the last line may lack its end.
func readLine(r *bufio.Reader, limit int) (string, error) {
	var line []byte
	over := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !over {
			line = append(line, chunk...)
			if len(bytes.TrimRight(line, "\r\n")) > limit {
				over, line = true, nil
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == nil, errors.Is(err, io.EOF) && (over || len(line) > 0):
			if over {
				return "", errLineTooLong
			}
			return strings.TrimRight(string(line), "\r\n"), nil
		default:
			return "", err
		}
	}
}
