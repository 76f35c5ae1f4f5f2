// Command healthcheck probes a nanofleet service's health endpoint. The
// service images have no shell, curl or wget, so compose healthchecks run
// this instead:
//
//	healthcheck [-timeout 3s] [URL]
//
// It exits 0 when URL (default http://127.0.0.1:9090/healthz) answers with
// a 2xx status within the timeout, and 1 otherwise, printing why.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

const defaultURL = "http://127.0.0.1:9090/healthz"

func main() {
	timeout := flag.Duration("timeout", 3*time.Second, "give up after this long")
	flag.Parse()
	url := defaultURL
	if flag.NArg() > 0 {
		url = flag.Arg(0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := probe(ctx, url); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
}

// probe GETs url and reports an error unless the answer is 2xx.
func probe(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return nil
}
