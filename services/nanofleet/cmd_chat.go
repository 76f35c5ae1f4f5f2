package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

func chatCmd(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	var c common
	env.register(fs, &c)
	sess := fs.String("session", "cli:direct", "session key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cv, err := openConversation(ctx, env, &c, "chat", *sess)
	if err != nil {
		return err
	}
	defer cv.close(ctx)
	fmt.Fprintf(env.stdout, "nanofleet chat — session %s. /help for commands, Ctrl-D to leave.\n", *sess)
	lines := readLines(ctx, bufio.NewReader(env.stdin))
	for {
		fmt.Fprint(env.stdout, "› ")
		var line string
		var err error
		select {
		case l := <-lines:
			line, err = l.text, l.err
		case <-ctx.Done():
			// Interrupted at the prompt: a read of the terminal cannot
			// be cancelled, so it is left to the process's end.
			fmt.Fprintln(env.stdout)
			return nil
		}
		if errors.Is(err, errLineTooLong) {
			// One message lost is better than the whole chat.
			fmt.Fprintf(env.stderr, "error: a message is at most %d bytes; that one was not sent\n", maxChatLine)
			continue
		}
		if err != nil {
			fmt.Fprintln(env.stdout)
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		text := strings.TrimSpace(line)
		if text == "" {
			continue
		}
		if text == "/exit" || text == "/quit" {
			return nil
		}
		out, err := cv.ask(ctx, text, env.stderr)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintln(env.stderr, "error:", err)
			continue
		}
		fmt.Fprintf(env.stdout, "%s\n\n", out.GetContent())
	}
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
