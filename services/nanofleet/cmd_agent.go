package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/fleetdir"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// conversation is the fleet and client behind agent and chat.
type conversation struct {
	lock    *fleetdir.Lock // held while the fleet runs here
	fleet   *fleet.Fleet
	client  *fleet.Client
	session string
	chat    string
	// notices is where the conversation says what the user waits on
	// (the store filling); the command's stderr.
	notices io.Writer
}

// openConversation joins the fleet (see [fleet.Options.ClientOnly]) or
// starts one in-process; command is "agent" or "chat".
func openConversation(ctx context.Context, env *environment, c *common, command, sessionKey string) (*conversation, error) {
	file, err := env.load(c)
	if err != nil {
		return nil, err
	}
	cv := &conversation{session: sessionKey, chat: strings.TrimPrefix(sessionKey, "cli:"), notices: env.stderr}
	opts := fleet.Options{
		File: file, Getenv: env.getenv, DataDir: c.dataDir, Workspace: c.workspace,
		Workers: 1, ClientOnly: file.NATS.URL != "",
	}
	if !opts.ClientOnly {
		// Join the fleet running on the data directory; only when none
		// runs does this conversation run one here, holding the directory.
		lock, creds, err := lockDataDir(c.dataDir, command)
		var locked *fleetdir.LockedError
		switch {
		case errors.As(err, &locked):
			if file.NATS.URL, err = findFleet(ctx, c.dataDir); err != nil {
				return nil, err
			}
			opts.ClientOnly = true
		case err != nil:
			return nil, err
		default:
			cv.lock, opts.Credentials = lock, creds
		}
	}
	if opts.ClientOnly && c.model != "" {
		return nil, errors.New("--model sets the model of a fleet this command starts, but it joins a running one: restart that fleet with --model, or say /model NAME in the session")
	}
	log := env.logger(c.logLevel)
	f, err := fleet.Start(ctx, opts, fleet.WithLogger(log))
	if err != nil {
		cv.close(ctx)
		return nil, err
	}
	cv.fleet = f
	if opts.ClientOnly {
		// The fleet may stop or restart under a joined conversation; the
		// connection tries again until it is back, which without a word
		// would look like a hang.
		f.Bus.NC.SetDisconnectErrHandler(func(_ *nats.Conn, err error) {
			fmt.Fprintf(env.stderr, "nanofleet: lost the fleet (%v); messages cannot be sent until it is back. Ctrl-C leaves\n", err)
		})
		f.Bus.NC.SetReconnectHandler(func(*nats.Conn) { fmt.Fprintln(env.stderr, "nanofleet: the fleet is back") })
	}
	if cv.client, err = fleet.NewClient(ctx, f.Bus, "cli", fleet.WithClientLogger(log)); err != nil {
		cv.close(ctx)
		return nil, err
	}
	return cv, nil
}

// close ends the conversation. A fleet of its own stops at once when ctx
// ended (the user interrupted): nobody here waits for a running turn any
// more, and it resumes at the next start.
func (cv *conversation) close(ctx context.Context) {
	if cv.fleet != nil && cv.fleet.Bus != nil {
		// Leaving is no loss of the fleet.
		cv.fleet.Bus.NC.SetDisconnectErrHandler(nil)
		cv.fleet.Bus.NC.SetReconnectHandler(nil)
	}
	if cv.client != nil {
		cv.client.Close()
	}
	switch {
	case cv.fleet == nil:
	case ctx.Err() != nil:
		cv.fleet.StopNow()
	default:
		cv.fleet.Stop()
	}
	if cv.lock != nil {
		cv.lock.Release()
	}
}

// ask sends text and waits for its answer, printing progress to progress
// (may be nil).
func (cv *conversation) ask(ctx context.Context, text string, progress io.Writer) (*nanofleetv1.OutboundMessage, error) {
	s, err := cv.send(ctx, text, progress)
	if err != nil {
		return nil, err
	}
	return s.answer(ctx)
}

// sentTurn is a message the fleet has stored, whose answer is awaited.
type sentTurn struct {
	cv      *conversation
	p       *fleet.Pending
	storage func(context.Context) error
}

// send publishes text as the conversation's next message and returns once
// the fleet has stored it, so that whatever is sent next comes after it.
func (cv *conversation) send(ctx context.Context, text string, progress io.Writer) (*sentTurn, error) {
	req := cv.request(text)
	if progress != nil {
		req.OnLive = func(o *nanofleetv1.OutboundMessage) {
			switch o.GetKind() {
			case nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT:
				fmt.Fprintf(progress, "  ↳ %s\n", o.GetContent())
			case nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS:
				fmt.Fprintf(progress, "  … %s\n", o.GetContent())
			}
		}
	}
	storage := cv.storage()
	if err := storage(ctx); err != nil {
		return nil, fmt.Errorf("the message was not sent: %w; free space there and send it again", err)
	}
	p, err := cv.client.Send(ctx, req)
	if err != nil {
		// A disk that filled at once (another process's file) fails the
		// publish before the guard's next look at it: asked again, it
		// names the cause ("publish: no ack in 10s" did not).
		if serr := storage(ctx); serr != nil {
			return nil, fmt.Errorf("the fleet did not confirm the message: %w (%w); free space there and send it again", serr, err)
		}
		return nil, err
	}
	return &sentTurn{cv: cv, p: p, storage: storage}, nil
}

// answer waits for the turn's final answer, at most 15 minutes.
func (s *sentTurn) answer(ctx context.Context) (*nanofleetv1.OutboundMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	replies, err := s.cv.wait(ctx, s.p, s.storage)
	if err != nil {
		return nil, err
	}
	return fleet.Final(replies)
}

// request is text as a message of the conversation's session.
func (cv *conversation) request(text string) fleet.Request {
	req := fleet.Request{ChatID: cv.chat, Text: text}
	if cv.session != session.Key("cli", cv.chat) {
		req.SessionKey = cv.session
	}
	return req
}

// storageCheck is how often a conversation with a fleet of its own looks
// at its store while a turn runs.
const storageCheck = time.Second

// storage reports why the conversation's fleet cannot store messages now:
// its own store guard, or for a joined fleet the all-in-one's, asked over
// NATS (nil from services on an external NATS, which have none).
func (cv *conversation) storage() func(context.Context) error {
	switch {
	case cv.fleet == nil:
		return func(context.Context) error { return nil }
	case cv.fleet.Storage != nil:
		return func(context.Context) error { return cv.fleet.Storage.Err() }
	}
	return func(ctx context.Context) error { return fleet.JoinedStorage(ctx, cv.fleet.Bus) }
}

// wait waits for p's turn. While the store is full the turn cannot commit
// its answer; it finishes once space is freed, so the conversation keeps
// waiting, and says so, instead of looking hung.
func (cv *conversation) wait(ctx context.Context, p *fleet.Pending, storage func(context.Context) error) ([]*nanofleetv1.OutboundMessage, error) {
	type result struct {
		replies []*nanofleetv1.OutboundMessage
		err     error
	}
	done := make(chan result, 1)
	go func() {
		r, err := p.Wait(ctx)
		done <- result{r, err}
	}()
	tick := time.NewTicker(storageCheck)
	defer tick.Stop()
	full := false
	for {
		select {
		case r := <-done:
			if full && r.err == nil {
				// Stored before the next look at the store: it has room.
				fmt.Fprintln(cv.notices, "nanofleet: the store has room again; the turn goes on")
			}
			return r.replies, r.err
		case <-tick.C:
			switch err := storage(ctx); {
			case err != nil && !full:
				full = true
				fmt.Fprintf(cv.notices, "nanofleet: %v: the answer cannot be stored until space is freed; the turn goes on then (Ctrl-C leaves; it resumes at the next start)\n", err)
			case err == nil && full:
				full = false
				fmt.Fprintln(cv.notices, "nanofleet: the store has room again; the turn goes on")
			}
		}
	}
}

func agentCmd(ctx context.Context, env *environment, args []string) error {
	var c common
	var msg, sess string
	var msgGiven bool
	line := &cmd{name: "agent", synopsis: "[-m TEXT]", summary: "Send one message and print the reply: to the running fleet, else to a fleet of its own until it exits. Without -m, chat interactively, as nanobot's agent does (nanofleet chat).",
		flags: func(fs *flag.FlagSet) {
			env.register(fs, &c)
			fs.Func("m", "the `message` to send (quote one of several words); without it, an interactive chat",
				func(s string) error { msg, msgGiven = s, true; return nil })
			fs.StringVar(&sess, "session", "cli:direct", "session `key`")
		}}
	if _, err := line.parse(env.stdout, args); err != nil {
		return err
	}
	switch {
	case !msgGiven:
		return runChat(ctx, env, &c, "agent", sess)
	case strings.TrimSpace(msg) == "":
		return &usageError{msg: "agent: -m TEXT is empty", usage: line.usage()}
	}
	cv, err := openConversation(ctx, env, &c, "agent", sess)
	if err != nil {
		return err
	}
	defer cv.close(ctx)
	out, err := cv.ask(ctx, msg, nil)
	if err != nil && ctx.Err() != nil {
		return errInterrupted // not the context's "context canceled"
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, out.GetContent())
	if out.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR {
		return errors.New("the turn failed")
	}
	return nil
}
